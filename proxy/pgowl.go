package proxy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/classify"
)

// pgowlResult is what a pgowl.* command produces: a command tag and, for
// SHOW, a result set of text columns.
type pgowlResult struct {
	tag     string
	columns []string
	rows    [][]string
	// warning is sent as a WARNING notice before the command completes.
	warning string
	err     error
}

// runPgowl executes a SET, RESET or SHOW of a pgowl.* setting for this session.
func (sess *session) runPgowl(cmd *classify.PgowlCommand) pgowlResult {
	switch cmd.Kind {
	case classify.PgowlShow:
		return sess.showPgowl(cmd.Name)
	case classify.PgowlSet, classify.PgowlReset:
		reset := cmd.Kind == classify.PgowlReset
		tag := "SET"
		if reset {
			tag = "RESET"
		}
		if cmd.Name == "read_after" {
			// A token: takes effect at once, whatever the transaction does.
			value := cmd.Value
			if reset {
				value = ""
			}
			if err := sess.setReadAfterToken(value); err != nil {
				return pgowlResult{err: err}
			}
			return pgowlResult{tag: tag}
		}
		if cmd.Name != "notice" && cmd.Name != "max_replica_lag" && cmd.Name != "max_cost" {
			break
		}
		if sess.txState().failed() {
			return pgowlResult{err: &clientError{SQLState: "25P02",
				Message: "current transaction is aborted, commands ignored until end of transaction block"}}
		}
		if cmd.Local && !sess.txState().inTransaction() {
			// As PostgreSQL does: a warning, and no effect.
			return pgowlResult{tag: tag, warning: "SET LOCAL can only be used in transaction blocks"}
		}
		tx := sess.localPgowl
		if tx == nil && sess.txState().inTransaction() {
			// As settings are: the transaction's end keeps a SET and drops a
			// SET LOCAL when it commits, and drops both when it rolls back.
			now := sess.currentPgowl()
			tx = &pgowlTransaction{atStart: now, onCommit: now}
			sess.localPgowl = tx
		}
		defer func() {
			if !cmd.Local && tx != nil {
				switch cmd.Name {
				case "notice":
					tx.onCommit.notice = sess.notice
				case "max_replica_lag":
					tx.onCommit.maxLag = sess.maxLag
				case "max_cost":
					tx.onCommit.maxCost = sess.maxCost
				}
			}
		}()
		switch cmd.Name {
		case "notice":
			if reset {
				sess.notice = noticeConfigured
				return pgowlResult{tag: "RESET"}
			}
			on, ok := parseBool(cmd.Value)
			if !ok {
				return pgowlResult{err: &clientError{SQLState: sqlstateInvalidParamValue,
					Message: fmt.Sprintf("pgowl: parameter \"pgowl.notice\" requires a Boolean value, not %q", cmd.Value)}}
			}
			sess.notice = noticeOff
			if on {
				sess.notice = noticeOn
			}
			return pgowlResult{tag: "SET"}
		case "max_replica_lag":
			if reset {
				sess.maxLag = 0
				return pgowlResult{tag: "RESET"}
			}
			lag, err := parseLag(cmd.Value)
			if err != nil {
				return pgowlResult{err: &clientError{SQLState: sqlstateInvalidParamValue,
					Message: fmt.Sprintf("pgowl: invalid value for parameter \"pgowl.max_replica_lag\": %q", cmd.Value),
					Hint:    "Use a duration such as '500ms' or '2s'."}}
			}
			if lag <= 0 {
				// 0 would mean no standby ever qualifies (every sample has an age).
				return pgowlResult{err: &clientError{SQLState: sqlstateInvalidParamValue,
					Message: fmt.Sprintf("pgowl: pgowl.max_replica_lag must be greater than 0, not %q", cmd.Value),
					Hint:    "RESET pgowl.max_replica_lag returns to the configured limit; a /*pgowl:primary*/ hint sends one statement to the primary."}}
			}
			if limit := sess.srv.live().policy.MaxReplicaLag; lag > limit {
				return pgowlResult{err: &clientError{SQLState: sqlstateInvalidParamValue,
					Message: fmt.Sprintf("pgowl: pgowl.max_replica_lag can only tighten the configured routing.max_replica_lag (%s), not loosen it to %s", limit, lag)}}
			}
			sess.maxLag = lag
			return pgowlResult{tag: "SET"}
		case "max_cost":
			if reset {
				sess.maxCost = 0
				return pgowlResult{tag: "RESET"}
			}
			limit, err := sess.parseMaxCost(cmd.Value)
			if err != nil {
				return pgowlResult{err: err}
			}
			sess.maxCost = limit
			return pgowlResult{tag: "SET"}
		}
	}
	return pgowlResult{err: unknownPgowlSetting(cmd.Name)}
}

// pgowlSettings are the session's pgowl.* settings.
type pgowlSettings struct {
	notice  noticeSetting
	maxLag  time.Duration
	maxCost float64
}

// pgowlTransaction is what the pgowl.* settings become when the transaction
// block in which they changed ends: onCommit (the SETs, not the SET LOCALs)
// when it commits, atStart when it rolls back. Savepoints are followed as
// PostgreSQL follows them for its own settings: ROLLBACK TO a savepoint
// undoes the SETs and SET LOCALs made since it was set, RELEASE keeps them.
type pgowlTransaction struct {
	atStart, onCommit pgowlSettings
	// savepoints are the savepoints set in the block and not yet released,
	// with what ROLLBACK TO each restores: the settings in force and on commit.
	savepoints savepointMarks[pgowlAtSavepoint]
}

// pgowlAtSavepoint is the pgowl.* settings when a savepoint was set.
type pgowlAtSavepoint struct {
	now, onCommit pgowlSettings
}

// currentPgowl returns the session's pgowl.* settings in force.
func (sess *session) currentPgowl() pgowlSettings {
	return pgowlSettings{notice: sess.notice, maxLag: sess.maxLag, maxCost: sess.maxCost}
}

// followSavepoint applies a SAVEPOINT, RELEASE or ROLLBACK TO that ran
// alone and succeeded inside the session's transaction block to the pgowl.*
// settings (see pgowlTransaction). A name not found is left alone:
// PostgreSQL refused the statement then.
func (sess *session) followSavepoint(st *classify.TransactionStatement) {
	if st == nil || st.Savepoint == "" {
		return
	}
	tx := sess.localPgowl
	if tx == nil {
		if st.Kind != classify.TxKindSavepoint {
			return
		}
		now := sess.currentPgowl()
		tx = &pgowlTransaction{atStart: now, onCommit: now}
		sess.localPgowl = tx
	}
	at, back, _ := tx.savepoints.follow(st, func() pgowlAtSavepoint {
		return pgowlAtSavepoint{now: sess.currentPgowl(), onCommit: tx.onCommit}
	})
	if back {
		sess.notice, sess.maxLag, sess.maxCost = at.now.notice, at.now.maxLag, at.now.maxCost
		tx.onCommit = at.onCommit
	}
}

// endPgowlTransaction settles the pgowl.* settings when the transaction
// block in which they changed has ended.
func (sess *session) endPgowlTransaction(committed bool) {
	if tx := sess.localPgowl; tx != nil {
		settled := tx.atStart
		if committed {
			settled = tx.onCommit
		}
		sess.notice, sess.maxLag, sess.maxCost = settled.notice, settled.maxLag, settled.maxCost
		sess.localPgowl = nil
	}
}

// noticeSetting is a session's pgowl.notice: the configured routing.notice, as the configuration
// in force says it (a reload changes it for every session that did not set it, as a reload of
// postgresql.conf changes a setting no session set), or what the session set.
type noticeSetting uint8

const (
	noticeConfigured noticeSetting = iota
	noticeOn
	noticeOff
)

// wantsNotice reports whether the session's units get the routing NOTICE now.
func (sess *session) wantsNotice() bool {
	switch sess.notice {
	case noticeOn:
		return true
	case noticeOff:
		return false
	}
	return sess.srv.live().cfg.Routing.Notice
}

func unknownPgowlSetting(name string) error {
	return &clientError{SQLState: sqlstateUndefinedObject,
		Message: fmt.Sprintf("pgowl: unrecognized configuration parameter \"pgowl.%s\"", name),
		Hint:    "pgowl knows pgowl.notice, pgowl.max_replica_lag, pgowl.max_cost, pgowl.read_after, pgowl.write_position, pgowl.nodes and pgowl.explain."}
}

func (sess *session) showPgowl(name string) pgowlResult {
	switch name {
	case "notice":
		v := "off"
		if sess.wantsNotice() {
			v = "on"
		}
		return pgowlResult{tag: "SHOW", columns: []string{"pgowl.notice"}, rows: [][]string{{v}}}
	case "max_replica_lag":
		return pgowlResult{tag: "SHOW", columns: []string{"pgowl.max_replica_lag"}, rows: [][]string{{sess.effectiveMaxLag().String()}}}
	case "max_cost":
		v := "0"
		if sess.maxCost > 0 {
			v = strconv.FormatFloat(sess.maxCost, 'f', -1, 64)
		}
		return pgowlResult{tag: "SHOW", columns: []string{"pgowl.max_cost"}, rows: [][]string{{v}}}
	case "write_position", "read_after":
		// The position the session's reads wait for: a token another
		// session (or pgowl instance) can SET pgowl.read_after to.
		snap := sess.srv.opts.Nodes.Snapshot()
		sess.settleWritePosition(context.Background(), snap, waitInTurn)
		pos, _ := sess.readAfter(context.Background(), snap)
		if name == "read_after" {
			pos = sess.ryw.token
		}
		return pgowlResult{tag: "SHOW", columns: []string{"pgowl." + name}, rows: [][]string{{pos.LSN.String()}}}
	case "nodes":
		if err := sess.requireAdmin(name); err != nil {
			return pgowlResult{err: err}
		}
		return sess.showNodes()
	case "explain":
		if err := sess.requireAdmin(name); err != nil {
			return pgowlResult{err: err}
		}
		return pgowlResult{tag: "SHOW", columns: []string{"pgowl.explain"}, rows: [][]string{{sess.last.explain()}}}
	}
	return pgowlResult{err: unknownPgowlSetting(name)}
}

func (sess *session) showNodes() pgowlResult {
	snap := sess.srv.opts.Nodes.Snapshot()
	now := time.Now()
	res := pgowlResult{tag: "SHOW", columns: []string{"name", "address", "role", "state", "lag_ms", "lag_bytes", "sample_age_ms", "timeline", "in_use", "idle", "active", "lock_waiting", "max_connections", "guards_in_flight"}}
	for _, n := range snap.Nodes {
		state := "down"
		switch {
		case n.Excluded != "":
			state = "excluded: " + n.Excluded
		case n.Up:
			state = "up"
		}
		lagMS, lagBytes := "", ""
		if n.LagKnown {
			lagMS = strconv.FormatInt(n.Lag.Milliseconds(), 10)
			lagBytes = strconv.FormatUint(n.LagBytes, 10)
		}
		age := ""
		if !n.SampledAt.IsZero() {
			age = strconv.FormatInt(now.Sub(n.SampledAt).Milliseconds(), 10)
		}
		inUse, idle := sess.srv.opts.Pool.Stats(n.Name)
		active, waiting, maxConns := "", "", ""
		if l := n.Load; l.Known {
			active, waiting, maxConns = strconv.Itoa(l.Active), strconv.Itoa(l.LockWaiting), strconv.Itoa(l.MaxConnections)
		}
		res.rows = append(res.rows, []string{n.Name, n.Addr, n.Role.String(), state, lagMS, lagBytes, age,
			strconv.FormatUint(uint64(n.Timeline), 10), strconv.Itoa(inUse), strconv.Itoa(idle),
			active, waiting, maxConns, sess.srv.guards.inFlightOn(n.Name)})
	}
	return res
}

// answerPgowl answers a pgowl command sent as a simple Query.
func (sess *session) answerPgowl(cmd *classify.PgowlCommand, _ bool) {
	res := sess.runPgowl(cmd)
	if res.err != nil {
		sess.send(toErrorResponse(res.err))
		return
	}
	if res.columns != nil {
		sess.send(rowDescription(res.columns))
	}
	sess.sendRows(res)
}

func (sess *session) sendRows(res pgowlResult) {
	if res.warning != "" {
		sess.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "25P01", Message: res.warning})
	}
	for _, row := range res.rows {
		values := make([][]byte, len(row))
		for i, v := range row {
			if v != "" {
				values[i] = []byte(v)
			}
		}
		sess.send(&pgproto3.DataRow{Values: values})
	}
	sess.send(&pgproto3.CommandComplete{CommandTag: []byte(res.tag)})
}

func rowDescription(columns []string) *pgproto3.RowDescription {
	rd := &pgproto3.RowDescription{}
	for _, c := range columns {
		rd.Fields = append(rd.Fields, pgproto3.FieldDescription{Name: []byte(c), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1})
	}
	return rd
}

// answerPgowlBatch answers an extended batch whose statements are all pgowl
// commands, message by message as a server would. It reports false when the
// batch has no pgowl command and must be routed.
func (sess *session) answerPgowlBatch(stmts []*preparedStmt, synced bool) (bool, error) {
	pgowlCount := 0
	for _, st := range stmts {
		if st.effects.Pgowl != nil {
			pgowlCount++
		}
	}
	if pgowlCount == 0 {
		return false, nil
	}
	if pgowlCount != len(stmts) {
		sess.send(toErrorResponse(&clientError{SQLState: sqlstateFeatureNotSupported,
			Message: "pgowl: a pgowl.* command cannot share an extended-protocol batch with other statements",
			Hint:    "Send SET/SHOW pgowl.* in its own batch."}))
		sess.endRefused(synced)
		return true, nil
	}
	sess.answerBatchLocally(func(st *preparedStmt) {
		if st != nil && st.effects.Pgowl != nil && st.effects.Pgowl.Kind == classify.PgowlShow {
			if res := sess.runPgowl(st.effects.Pgowl); res.err == nil {
				sess.send(rowDescription(res.columns))
				return
			}
		}
		sess.send(&pgproto3.NoData{})
	}, func(st *preparedStmt) bool {
		res := sess.runPgowl(st.effects.Pgowl)
		if res.err != nil {
			sess.send(toErrorResponse(res.err))
			sess.endRefused(synced)
			return false
		}
		sess.sendRows(res)
		return true
	})
	return true, nil
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "yes", "1", "t", "y":
		return true, true
	case "off", "false", "no", "0", "f", "n":
		return false, true
	}
	return false, false
}

// parseLag accepts Go durations ("500ms", "2s"), PostgreSQL-style units
// ("500 ms", "2 s", "1 min") and a bare number of milliseconds.
func parseLag(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Millisecond, nil
	}
	compact := strings.ReplaceAll(v, " ", "")
	compact = strings.TrimSuffix(compact, "in") // "min" → "m"
	d, err := time.ParseDuration(compact)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q", v)
	}
	return d, nil
}

// requireAdmin refuses an admin command to a user not in admin.users (when the list is set).
func (sess *session) requireAdmin(name string) error {
	if sess.srv.live().admins == nil || sess.srv.live().admins[sess.user] {
		return nil
	}
	return &clientError{SQLState: sqlstateInsufficientPrivilege,
		Message: fmt.Sprintf("pgowl: permission denied to SHOW pgowl.%s", name),
		Hint:    "Only the users listed in admin.users may run pgowl's admin commands."}
}
