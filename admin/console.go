package admin

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// ConsoleConn is the client side of an admin console session, after
// authentication: the proxy adapts its client connection to it.
type ConsoleConn interface {
	// ReadMessage returns the next client message's type and body; the body
	// is valid until the next call.
	ReadMessage() (typ byte, body []byte, err error)
	// Send buffers a message to the client.
	Send(msg pgproto3.BackendMessage) error
	// Flush writes what Send buffered.
	Flush() error
}

// Type OIDs of the console's columns (PostgreSQL's pg_type).
const (
	oidText = 25
	oidInt4 = 23
	oidInt8 = 20
)

// SQLSTATEs the console answers with.
const (
	sqlstateFeatureNotSupported = "0A000"
	sqlstateSyntaxError         = "42601"
)

// consoleHistoryRows is how many units SHOW HISTORY lists, newest first.
const consoleHistoryRows = 1000

// databaseStats are the totals of one client database, for SHOW STATS.
type databaseStats struct {
	units, transactions atomic.Uint64
	durationMicros      atomic.Uint64
}

// countDatabase adds u to its database's totals.
func (r *Recorder) countDatabase(u *Unit) {
	v, ok := r.databases.Load(u.Database)
	if !ok {
		v, _ = r.databases.LoadOrStore(u.Database, &databaseStats{})
	}
	st := v.(*databaseStats)
	st.units.Add(1)
	if u.Reason != route.ReasonInTransaction.String() {
		st.transactions.Add(1)
	}
	st.durationMicros.Add(uint64(u.Duration.Microseconds()))
}

// ServeConsole runs an admin console session for user until the client
// leaves or the connection fails. The caller has authenticated the client
// and sent AuthenticationOk.
func (r *Recorder) ServeConsole(c ConsoleConn, user string) error {
	params := [][2]string{
		{"server_version", "15.0 (pgowl " + r.src.Version + ")"}, {"server_encoding", "UTF8"}, {"client_encoding", "UTF8"},
		{"DateStyle", "ISO, MDY"}, {"integer_datetimes", "on"}, {"standard_conforming_strings", "on"},
		{"TimeZone", "UTC"}, {"application_name", ""}, {"is_superuser", "off"},
	}
	for _, p := range params {
		c.Send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	c.Send(&pgproto3.BackendKeyData{ProcessID: 0, SecretKey: []byte{0, 0, 0, 0}})
	c.Send(&pgproto3.ReadyForQuery{TxStatus: wire.TxIdle})
	if err := c.Flush(); err != nil {
		return err
	}
	skipUntilSync := false
	for {
		typ, body, err := c.ReadMessage()
		if err != nil {
			return err
		}
		switch typ {
		case wire.MsgTerminate:
			return nil
		case wire.MsgQuery:
			r.answer(c, strings.TrimRight(string(body), "\x00"), user)
			c.Send(&pgproto3.ReadyForQuery{TxStatus: wire.TxIdle})
		case wire.MsgSync:
			skipUntilSync = false
			c.Send(&pgproto3.ReadyForQuery{TxStatus: wire.TxIdle})
		case wire.MsgFlush:
		default:
			if !skipUntilSync {
				skipUntilSync = true
				c.Send(consoleError(sqlstateFeatureNotSupported, "pgowl admin console: only the simple query protocol is supported"))
			}
		}
		if err := c.Flush(); err != nil {
			return err
		}
	}
}

func consoleError(code, message string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: message}
}

// column is one result column: its name and type OID.
type column struct {
	name string
	oid  uint32
}

func textCols(names ...string) []column {
	cols := make([]column, len(names))
	for i, n := range names {
		cols[i] = column{n, oidText}
	}
	return cols
}

// table is a result being built: columns and rows of text values (nil is NULL).
type table struct {
	cols []column
	rows [][]any
}

func (t *table) add(values ...any) { t.rows = append(t.rows, values) }

// send writes t as RowDescription, DataRows and CommandComplete "SHOW".
func (t *table) send(c ConsoleConn) {
	rd := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(t.cols))}
	for i, col := range t.cols {
		size := int16(-1)
		switch col.oid {
		case oidInt4:
			size = 4
		case oidInt8:
			size = 8
		}
		rd.Fields[i] = pgproto3.FieldDescription{Name: []byte(col.name), DataTypeOID: col.oid, DataTypeSize: size, TypeModifier: -1}
	}
	c.Send(rd)
	for _, row := range t.rows {
		values := make([][]byte, len(row))
		for i, v := range row {
			switch v := v.(type) {
			case nil:
			case string:
				values[i] = []byte(v)
			case int:
				values[i] = strconv.AppendInt(nil, int64(v), 10)
			case int64:
				values[i] = strconv.AppendInt(nil, v, 10)
			case uint64:
				values[i] = strconv.AppendUint(nil, v, 10)
			case uint32:
				values[i] = strconv.AppendUint(nil, uint64(v), 10)
			case bool:
				values[i] = []byte(strconv.FormatBool(v))
			default:
				values[i] = fmt.Append(nil, v)
			}
		}
		c.Send(&pgproto3.DataRow{Values: values})
	}
	c.Send(&pgproto3.CommandComplete{CommandTag: []byte("SHOW")})
}

// consoleHelp lists the console's commands, as SHOW HELP answers.
var consoleHelp = []string{
	"Console usage",
	"SHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|STATS|STATS_TOTALS|LISTS|VERSION",
	"SHOW NODES       pgowl: each node's role, state, lag and pool",
	"SHOW HISTORY     pgowl: the latest routed units, newest first",
	"RELOAD           re-read the configuration file and apply it whole, or refuse it and say why",
	"PAUSE            hold new units (clients wait) once the transactions in flight have finished",
	"RESUME           release the held units; they are routed by the roles seen then",
}

// answer runs one console command.
func (r *Recorder) answer(c ConsoleConn, query, user string) {
	words := strings.Fields(strings.ToUpper(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(query), ";"))))
	if len(words) == 0 {
		c.Send(&pgproto3.EmptyQueryResponse{})
		return
	}
	switch words[0] {
	case "SHOW":
		if len(words) != 2 {
			c.Send(consoleError(sqlstateSyntaxError, "pgowl admin console: SHOW takes one word; SHOW HELP lists them"))
			return
		}
		t, ok := r.show(words[1])
		if !ok {
			c.Send(consoleError(sqlstateSyntaxError, fmt.Sprintf("pgowl admin console: unknown SHOW %s; SHOW HELP lists the commands", words[1])))
			return
		}
		if words[1] == "HELP" {
			for _, line := range consoleHelp {
				c.Send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: line})
			}
			c.Send(&pgproto3.CommandComplete{CommandTag: []byte("SHOW")})
			return
		}
		t.send(c)
	case "RELOAD", "PAUSE", "RESUME":
		if len(words) != 1 {
			c.Send(consoleError(sqlstateSyntaxError, fmt.Sprintf("pgowl admin console: %s takes no argument", words[0])))
			return
		}
		r.answerLifecycle(c, words[0])
	case "SUSPEND", "SHUTDOWN", "KILL", "DISABLE", "ENABLE", "RECONNECT", "WAIT_CLOSE":
		c.Send(consoleError(sqlstateFeatureNotSupported, fmt.Sprintf("pgowl admin console: %s is not supported yet: pgowl's lifecycle commands come with a later version; restart pgowl to apply a new configuration", words[0])))
	case "SET":
		// Drivers set session options on connect; accept them and change nothing.
		c.Send(&pgproto3.CommandComplete{CommandTag: []byte("SET")})
	default:
		c.Send(consoleError(sqlstateSyntaxError, fmt.Sprintf("pgowl admin console: unknown command %s; SHOW HELP lists the commands", words[0])))
	}
}

// show builds the table of SHOW what.
func (r *Recorder) show(what string) (*table, bool) {
	now := time.Now()
	switch what {
	case "HELP":
		return nil, true
	case "VERSION":
		t := &table{cols: textCols("version")}
		t.add("pgowl " + r.src.Version)
		return t, true
	case "NODES":
		return r.showNodes(now), true
	case "HISTORY":
		return r.showHistory(), true
	case "POOLS":
		return r.showPools(), true
	case "CLIENTS":
		return r.showClients(), true
	case "SERVERS":
		return r.showServers(), true
	case "STATS":
		return r.showStats(now, false), true
	case "STATS_TOTALS":
		return r.showStats(now, true), true
	case "DATABASES":
		return r.showDatabases(), true
	case "LISTS":
		return r.showLists(), true
	case "CONFIG":
		return r.showConfig(), true
	}
	return nil, false
}

func (r *Recorder) clients() []Client {
	if r.src.Clients == nil {
		return nil
	}
	return r.src.Clients.Clients()
}

func (r *Recorder) showNodes(now time.Time) *table {
	t := &table{cols: []column{{"name", oidText}, {"addr", oidText}, {"role", oidText}, {"state", oidText}, {"up", oidText},
		{"lag_ms", oidInt8}, {"lag_bytes", oidInt8}, {"sample_age_ms", oidInt8}, {"timeline", oidInt8},
		{"in_use", oidInt4}, {"idle", oidInt4}, {"waiting", oidInt4}}}
	snap := r.src.Nodes.Snapshot()
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		st := r.src.Pool.NodeStats(n.Name)
		var lag, lagBytes, age any
		if n.LagKnown {
			lag, lagBytes = n.Lag.Milliseconds(), n.LagBytes
		}
		if !n.SampledAt.IsZero() {
			age = now.Sub(n.SampledAt).Milliseconds()
		}
		t.add(n.Name, n.Addr, n.Role.String(), NodeVerdict(n, r.policy(), now), n.Up, lag, lagBytes, age, n.Timeline, st.InUse, st.Idle, st.Waiting)
	}
	return t
}

func (r *Recorder) showHistory() *table {
	t := &table{cols: []column{{"time", oidText}, {"conn_id", oidInt8}, {"user", oidText}, {"database", oidText}, {"application_name", oidText},
		{"node", oidText}, {"role", oidText}, {"reason", oidText}, {"refusal", oidText}, {"lag_ms", oidInt8}, {"outcome", oidText},
		{"duration_us", oidInt8}, {"fingerprint", oidText}, {"statement", oidText}, {"ai", oidText}}}
	for _, u := range r.history.Latest(Filter{}, consoleHistoryRows) {
		t.add(u.Time.UTC().Format(time.RFC3339Nano), u.ConnID, u.User, u.Database, u.Application, u.Node, u.Role.String(), u.Reason, u.Refusal,
			u.Lag.Milliseconds(), u.Outcome, u.Duration.Microseconds(), u.Fingerprint, u.Statement, u.AI)
	}
	return t
}

// pairKey is a (database, user) pool as PgBouncer counts them.
type pairKey struct{ database, user string }

func (r *Recorder) showPools() *table {
	t := &table{cols: append(textCols("database", "user"),
		column{"cl_active", oidInt4}, column{"cl_waiting", oidInt4}, column{"cl_active_cancel_req", oidInt4}, column{"cl_waiting_cancel_req", oidInt4},
		column{"sv_active", oidInt4}, column{"sv_active_cancel", oidInt4}, column{"sv_being_canceled", oidInt4}, column{"sv_idle", oidInt4},
		column{"sv_used", oidInt4}, column{"sv_tested", oidInt4}, column{"sv_login", oidInt4}, column{"maxwait", oidInt4}, column{"maxwait_us", oidInt4},
		column{"pool_mode", oidText}, column{"load_balance_hosts", oidText})}
	type counts struct{ clients, active int }
	pairs := map[pairKey]*counts{}
	var order []pairKey
	for _, cl := range r.clients() {
		k := pairKey{cl.Database, cl.User}
		if pairs[k] == nil {
			pairs[k] = &counts{}
			order = append(order, k)
		}
		pairs[k].clients++
		if cl.Active {
			pairs[k].active++
		}
	}
	slices.SortFunc(order, func(a, b pairKey) int { return strings.Compare(a.database+"\x00"+a.user, b.database+"\x00"+b.user) })
	for _, k := range order {
		p := pairs[k]
		// A client running a unit holds one backend: sv_active. pgowl pools
		// backends per node, not per (database, user): idle ones are in SHOW SERVERS.
		t.add(k.database, k.user, p.clients, 0, 0, 0, p.active, 0, 0, 0, 0, 0, 0, 0, 0, r.config().Pool.Mode, nil)
	}
	return t
}

func splitAddr(addr string) (host string, port int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func (r *Recorder) showClients() *table {
	t := &table{cols: []column{{"type", oidText}, {"user", oidText}, {"database", oidText}, {"replication", oidText}, {"state", oidText},
		{"addr", oidText}, {"port", oidInt4}, {"local_addr", oidText}, {"local_port", oidInt4}, {"connect_time", oidText}, {"request_time", oidText},
		{"wait", oidInt4}, {"wait_us", oidInt4}, {"close_needed", oidInt4}, {"ptr", oidText}, {"link", oidText}, {"remote_pid", oidInt4},
		{"tls", oidText}, {"application_name", oidText}, {"prepared_statements", oidInt4}, {"id", oidInt8}}}
	localHost, localPort := splitAddr(r.config().Listen)
	for _, cl := range r.clients() {
		host, port := splitAddr(cl.Addr)
		state := "idle"
		if cl.Active {
			state = "active"
		}
		tls := ""
		if cl.TLS {
			tls = "TLS"
		}
		connected := cl.ConnectedAt.UTC().Format("2006-01-02 15:04:05 MST")
		t.add("C", cl.User, cl.Database, "none", state, host, port, localHost, localPort, connected, connected,
			0, 0, 0, fmt.Sprintf("%x", cl.ConnID), nil, 0, tls, cl.Application, 0, cl.ConnID)
	}
	return t
}

func (r *Recorder) showServers() *table {
	t := &table{cols: []column{{"type", oidText}, {"user", oidText}, {"database", oidText}, {"replication", oidText}, {"state", oidText},
		{"addr", oidText}, {"port", oidInt4}, {"local_addr", oidText}, {"local_port", oidInt4}, {"connect_time", oidText}, {"request_time", oidText},
		{"wait", oidInt4}, {"wait_us", oidInt4}, {"close_needed", oidInt4}, {"ptr", oidText}, {"link", oidText}, {"remote_pid", oidInt4},
		{"tls", oidText}, {"application_name", oidText}, {"prepared_statements", oidInt4}, {"id", oidInt8}}}
	// pgowl's pool reports counts per node, not each connection: one row per
	// backend connection, with the node as its database.
	id := 0
	for _, n := range r.config().Nodes {
		st := r.src.Pool.NodeStats(n.Name)
		for i := 0; i < st.InUse+st.Idle; i++ {
			state := "idle"
			if i < st.InUse {
				state = "active"
			}
			id++
			t.add("S", nil, n.Name, "none", state, n.Host, n.Port, nil, nil, nil, nil, 0, 0, 0, nil, nil, 0, "", "", 0, id)
		}
	}
	return t
}

func (r *Recorder) showStats(now time.Time, totals bool) *table {
	var names []string
	r.databases.Range(func(k, _ any) bool {
		names = append(names, k.(string))
		return true
	})
	slices.Sort(names)
	elapsed := max(now.Sub(r.src.Started).Seconds(), 1)
	if totals {
		t := &table{cols: append(textCols("database"), int8Cols("server_assignment_count", "xact_count", "query_count", "bytes_received",
			"bytes_sent", "xact_time", "query_time", "wait_time", "client_parse_count", "server_parse_count", "bind_count")...)}
		for _, name := range names {
			st := r.databaseStats(name)
			t.add(name, st.units.Load(), st.transactions.Load(), st.units.Load(), 0, 0, st.durationMicros.Load(), st.durationMicros.Load(), 0, 0, 0, 0)
		}
		return t
	}
	t := &table{cols: append(textCols("database"), int8Cols(
		"total_server_assignment_count", "total_xact_count", "total_query_count", "total_received", "total_sent",
		"total_xact_time", "total_query_time", "total_wait_time", "total_client_parse_count", "total_server_parse_count", "total_bind_count",
		"avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_recv", "avg_sent",
		"avg_xact_time", "avg_query_time", "avg_wait_time", "avg_client_parse_count", "avg_server_parse_count", "avg_bind_count")...)}
	for _, name := range names {
		st := r.databaseStats(name)
		units, xacts, micros := st.units.Load(), st.transactions.Load(), st.durationMicros.Load()
		var avgQuery uint64
		if units > 0 {
			avgQuery = micros / units
		}
		rate := func(v uint64) uint64 { return uint64(float64(v) / elapsed) }
		t.add(name, units, xacts, units, 0, 0, micros, micros, 0, 0, 0, 0,
			rate(units), rate(xacts), rate(units), 0, 0, avgQuery, avgQuery, 0, 0, 0, 0)
	}
	return t
}

func (r *Recorder) databaseStats(name string) *databaseStats {
	v, _ := r.databases.Load(name)
	return v.(*databaseStats)
}

func int8Cols(names ...string) []column {
	cols := make([]column, len(names))
	for i, n := range names {
		cols[i] = column{n, oidInt8}
	}
	return cols
}

func (r *Recorder) showDatabases() *table {
	t := &table{cols: []column{{"name", oidText}, {"host", oidText}, {"port", oidInt4}, {"database", oidText}, {"force_user", oidText},
		{"pool_size", oidInt4}, {"min_pool_size", oidInt4}, {"reserve_pool_size", oidInt4}, {"server_lifetime", oidInt4}, {"pool_mode", oidText},
		{"load_balance_hosts", oidText}, {"max_connections", oidInt4}, {"current_connections", oidInt4},
		{"max_client_connections", oidInt4}, {"current_client_connections", oidInt4}, {"paused", oidInt4}, {"disabled", oidInt4}}}
	cfg := r.config()
	// pgowl has no database list: every database of the nodes is reachable.
	// One row per node, named by the node, with its pool's figures.
	clients := len(r.clients())
	for _, n := range cfg.Nodes {
		st := r.src.Pool.NodeStats(n.Name)
		t.add(n.Name, n.Host, n.Port, "*", nil, cfg.Pool.MaxPerNode, cfg.Pool.MinIdle, 0, int(cfg.Pool.MaxLifetime.Seconds()), cfg.Pool.Mode,
			nil, cfg.Pool.MaxPerNode, st.InUse+st.Idle, cfg.Limits.MaxClientConnections, clients, 0, 0)
	}
	t.add(config.AdminDatabase, nil, nil, config.AdminDatabase, nil, 0, 0, 0, 0, "statement", nil, 0, 0, 0, 0, 0, 0)
	return t
}

func (r *Recorder) showLists() *table {
	t := &table{cols: []column{{"list", oidText}, {"items", oidInt4}}}
	clients := r.clients()
	users, databases := map[string]bool{}, map[string]bool{}
	used := 0
	for _, cl := range clients {
		users[cl.User], databases[cl.Database] = true, true
		if cl.Active {
			used++
		}
	}
	free, busy := 0, 0
	for _, n := range r.config().Nodes {
		st := r.src.Pool.NodeStats(n.Name)
		free += st.Idle
		busy += st.InUse
	}
	t.add("databases", len(r.config().Nodes))
	t.add("users", len(r.config().Users))
	t.add("pools", len(databases)*max(len(users), 1))
	t.add("free_clients", 0)
	t.add("used_clients", len(clients))
	t.add("login_clients", 0)
	t.add("free_servers", free)
	t.add("used_servers", busy)
	t.add("dns_names", 0)
	t.add("dns_zones", 0)
	t.add("dns_queries", 0)
	t.add("dns_pending", 0)
	return t
}

// showConfig lists every scalar configuration key with its value and
// default, PgBouncer's max_client_conn and max_user_connections first. No
// password is shown.
func (r *Recorder) showConfig() *table {
	t := &table{cols: textCols("key", "value", "default", "changeable")}
	cfg, def := r.config(), config.Default()
	t.add("max_client_conn", strconv.Itoa(cfg.Limits.MaxClientConnections), strconv.Itoa(def.Limits.MaxClientConnections), "no")
	t.add("max_user_connections", "0", "0", "no")
	t.add("default_pool_size", strconv.Itoa(cfg.Pool.MaxPerNode), strconv.Itoa(def.Pool.MaxPerNode), "no")
	t.add("pool_mode", cfg.Pool.Mode, def.Pool.Mode, "no")
	defaults := map[string]string{}
	for _, k := range config.Keys() {
		defaults[k.Path] = k.Default
	}
	walkConfig("", reflect.ValueOf(cfg), func(path, value string) {
		t.add(path, value, defaults[path], "no")
	})
	return t
}

// walkConfig calls fn for every scalar field of the config struct v, by
// key path, skipping lists and every password (password, query_password, ...).
func walkConfig(prefix string, v reflect.Value, fn func(path, value string)) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		name := f.Tag.Get("mapstructure")
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		fv := v.Field(i)
		switch {
		case strings.Contains(name, "password") || fv.Kind() == reflect.Slice:
		case fv.Kind() == reflect.Struct:
			walkConfig(path, fv, fn)
		case fv.Type() == reflect.TypeFor[time.Duration]():
			fn(path, time.Duration(fv.Int()).String())
		default:
			fn(path, fmt.Sprint(fv.Interface()))
		}
	}
}
