package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// classifierState is what a session keeps for the classifier: the context its statements are
// classified in (database, user, search_path as changed by the session's SETs), and whether a
// statement that changes functions or views is waiting to have run.
type classifierState struct {
	ctx   classify.Context
	ready bool
	// setsSeen (the session's settings key), pendingSeen and lastPending say which of the
	// session's settings ctx reflects.
	setsSeen    string
	pendingSeen int
	lastPending string
	// changeRan: a unit that changes functions, views, casts, operators or types has run; once
	// the session is outside a transaction block (the change is committed, or rolled back), the
	// catalogue source is told what changed (changes: what the session's statements classified
	// since said they change), so that the session's next statement sees the change.
	changeRan bool
	changes   classify.CatalogueChanges
	// rolledBack: the transaction of changes ended without committing them; they are told to
	// the catalogue (it reads them again) but hold no session's reads (definition_changes.go).
	rolledBack bool
	// read is the read of changes sent on the session's backend right behind the unit that made
	// them (see sendCatalogueRead), told to the catalogue with them; nil when none was sent.
	read *catalog.SessionRead
	// created is the object (a function, a type, a view) the unit that made changes created, as
	// its statement says (classify.CreatedObject), told to the catalogue instead of a read; nil
	// when none, or when the unit failed.
	created classify.CreatedObject
	// createdIn is the context the statement that made created ran in: its search_path says
	// where an unqualified name went, whatever the session set since.
	createdIn classify.Context
	// createdAt is the catalogue's generation when the statement that makes created was sent
	// (catalog.Manager.Generation): a change told after it may be a later one of the same
	// object, which the take-in must not undo.
	createdAt uint64
	// prepareCreated: created is the unit's being sent, whose body is parsed ahead while the node
	// runs it (prepareCreatedWhileItRuns).
	prepareCreated bool
	// preparedTake is the catalogue with created taken in, derived while the node ran the unit
	// that makes it (prepareCreatedWhileItRuns), for tellChanges to store; nil when none was, or
	// it is not created's.
	preparedTake *catalog.PreparedTake
	// readOn is the backend whose replies to read are still to be read (the read is in flight,
	// see catalogue_read_in_flight.go), nil when none are; ahead is the statement classified
	// without the catalogue meanwhile whose verdict may depend on it, and aheadUnit the unit sent
	// with it before the read was read.
	readOn    *backend
	ahead     *aheadStatement
	aheadUnit *unit
}

// classify returns the effects of sql as the session would run it.
// paramTypes are the parameter type OIDs a Parse message declared (nil for a
// simple Query). This is the one place the session asks the classifier, so
// that what the classifier needs to know of the session (its database, its
// search_path) is gathered here.
func (sess *session) classify(sql string, paramTypes []uint32) classify.Effects {
	c := sess.srv.opts.Classifier
	st := &sess.cls
	st.refresh(sess, c)
	if st.changeRan && sess.idleForCatalogue() {
		if !st.changeToTakeIn() {
			st.tellChanges(c, sess.srv.definitions)
		} else if effects, ok := sess.classifyAheadOfRead(sql, paramTypes); ok {
			return effects
		} else {
			sess.drainCatalogueRead(nil, false)
		}
	}
	if effects, ok := sess.classifyOnceSent(sql, paramTypes); ok {
		return effects
	}
	return sess.classifyNow(sql, paramTypes)
}

// classifyNow classifies sql with the session's context as it is, the session's own changes
// told, and records the catalogue changes it makes.
func (sess *session) classifyNow(sql string, paramTypes []uint32) classify.Effects {
	c := sess.srv.opts.Classifier
	st := &sess.cls
	ctx := st.ctx
	ctx.ParamTypes = paramTypes
	effects := c.ClassifyToRoute(sql, &ctx) // labelled once sent (exchangeOn) or logged
	if effects.CatalogueChange {
		st.changes.Merge(effects.CatalogueChanges)
		if effects.CatalogueChanges == nil {
			st.changes.Merge(&classify.CatalogueChanges{Everything: true})
		}
	}
	return effects
}

// catalogueChangeRan records that a unit that changes the catalogue ran. When its transaction
// ended with it (status 'I': committed, or rolled back) the classifier is told at once, so that the
// catalogue is read while the client receives the answer and sends its next statement; otherwise
// the session's first statement outside the transaction block tells it (see classify). A read of
// the change still in flight tells it when it is read (drainCatalogueRead).
func (sess *session) catalogueChangeRan(status byte) {
	sess.cls.changeRan = true
	if status == wire.TxIdle && !sess.cls.changeToTakeIn() {
		sess.cls.tellChanges(sess.srv.opts.Classifier, sess.srv.definitions)
	}
}

// changeToTakeIn reports whether the catalogue is still to take in a committed change of the
// session that it will not read itself: a read in flight (readOn), or a function the statement
// that made it describes in full (created), which the next statement may be sent ahead of as of
// a read (catalogue_read_in_flight.go).
func (st *classifierState) changeToTakeIn() bool {
	return st.readOn != nil || (st.created != nil && st.changeRan)
}

// tellChanges tells the classifier what the session's statements changed in the catalogue: the
// change has run and its transaction ended, and whatever was read while it ran (before it was
// committed) misses it. A committed change of definitions is remembered in defs first (nil: not
// at all), so that no session's read planned with the catalogue that holds it goes to a standby
// behind it (definition_changes.go).
func (st *classifierState) tellChanges(c *classify.Classifier, defs *definitionChanges) {
	changes := st.changes
	if changes.Empty() {
		changes.Everything = true
	}
	if defs != nil && !st.rolledBack {
		defs.tell(st.ctx.Database, &changes, time.Now())
	}
	st.rolledBack = false
	m, ok := c.Catalogues().(*catalog.Manager)
	switch {
	case ok && st.read != nil && st.ctx.Database != "":
		m.ChangedAndRead(st.ctx.Database, &changes, st.read)
	case ok && st.created != nil && st.ctx.Database != "" && st.preparedTake != nil && st.preparedTake.Created() == st.created:
		m.TakePreparedSince(st.ctx.Database, &changes, st.preparedTake, st.createdAt)
	case ok && st.created != nil && st.ctx.Database != "":
		m.ChangedAndCreatedSince(st.ctx.Database, &changes, st.created, &st.createdIn, st.createdAt)
	default:
		c.CatalogueChanged(&st.ctx, &changes)
	}
	st.changeRan, st.changes, st.read = false, classify.CatalogueChanges{}, nil
	st.forgetCreated()
}

// forgetCreated forgets the object the session's last change created, and the catalogue derived
// with it, when the catalogue has been told, or the change is to be read instead.
func (st *classifierState) forgetCreated() {
	st.created, st.preparedTake = nil, nil
}

// coveredByCreated reports whether changes, the session's since its last tell, are those of the
// one statement that makes created.
func coveredByCreated(changes *classify.CatalogueChanges, created classify.CreatedObject) bool {
	own := created.Changes()
	return !changes.Empty() && changes.Within(&own)
}

// sendCatalogueRead writes, right behind unit u on be, a read of the catalogue objects u changes
// (catalog.SessionRead), when the change is sure to be committed or rolled back by the time the
// node reaches the read: u runs one statement that is no transaction control, outside any
// transaction block, to its ReadyForQuery, on the primary. The node then runs the read as soon as
// it has run u, in the same round trip, and the session's next statement finds the catalogue
// current instead of waiting for a read over the catalogue's own connection. relay passes the
// read's replies to it (relayCatalogueRead), not to the client.
func (sess *session) sendCatalogueRead(be *backend, u *unit, role route.Role) {
	st := &sess.cls
	st.prepareCreated = false
	if u.effects.CatalogueChange {
		st.forgetCreated() // a created function is the last change's alone
	}
	if !u.effects.CatalogueChange || u.runsNothing || !u.expectsReady || u.effects.Statements != 1 || u.effects.Tx != 0 ||
		u.carriesBegin || u.replaysFailure || sess.deferred != nil || role != route.RolePrimary ||
		be.openBatch || be.conn.TxStatus != wire.TxIdle || st.read != nil || st.readOn != nil || st.ctx.Database == "" {
		return
	}
	m, ok := sess.srv.opts.Classifier.Catalogues().(*catalog.Manager)
	if !ok {
		return
	}
	if changes := u.effects.CatalogueChanges; changes != nil && changes.Created != nil && coveredByCreated(&st.changes, changes.Created) &&
		sess.takesCreatedFromStatement(changes.Created) {
		// The statement says all of the object it makes: the catalogue takes it from there
		// once it has run (tellChanges), without a read.
		st.refresh(sess, sess.srv.opts.Classifier) // the settings the statement runs with
		st.created, st.createdIn = changes.Created, st.ctx
		st.createdAt = m.Generation(st.ctx.Database)
		st.createdIn.ParamTypes = nil
		st.prepareCreated = true
		return
	}
	read := m.PrepareSessionRead(st.ctx.Database, &st.changes)
	if read == nil {
		return
	}
	be.conn.Writer.Write(read.Messages(be.statements().prepared))
	be.expect.push(expectation{typ: wire.MsgSync, catalogueRead: read})
	st.read, st.readOn = read, be
}

// prepareCreatedWhileItRuns does ahead, once the unit that makes the object the catalogue takes
// from its statement is sent, while the node runs the CREATE, what the statement that uses the
// object next (as a migration's does) would otherwise wait for once it is sent ahead of the
// take-in (catalogue_read_in_flight.go): it derives the catalogue with the object taken in
// (catalog.Manager.PrepareTake) and analyses the object in it (Classifier.PrepareUses), parsing
// what that analysis needs; where no take can be prepared, it only parses what the analysis of a
// function will parse (Classifier.PrepareCreated). The
// catalogue is stored only once the CREATE has committed (tellChanges, catalog.Manager.TakePrepared),
// and only when no other change was stored meanwhile; else the object is taken in as before. The
// CREATE's time on the node covers this work: measured by integration/migrationbench, the take-in
// and the final classification of each use otherwise outran the node's time for the use.
func (sess *session) prepareCreatedWhileItRuns() {
	if st := &sess.cls; st.prepareCreated {
		st.prepareCreated = false
		if st.created != nil {
			ctx := st.createdIn
			c := sess.srv.opts.Classifier
			if m, ok := c.Catalogues().(*catalog.Manager); ok && ctx.Database != "" {
				if take := m.PrepareTake(ctx.Database, st.created, &ctx); take != nil {
					// The analysis parses what it needs, as PrepareCreated would.
					c.PrepareUses(take.Catalogue(), take.Taken(), &ctx)
					st.preparedTake = take
					return
				}
			}
			c.PrepareCreated(st.created, &ctx)
		}
	}
}

// takesCreatedFromStatement reports whether the session may let the catalogue take created from
// its statement: a view is made temporary, in no catalogue pgowl reads, when its query reads a
// temporary table, so a view is taken only while the session holds no temporary object (nor may
// hold one unseen: a recheck of its pins is due).
func (sess *session) takesCreatedFromStatement(created classify.CreatedObject) bool {
	if _, view := created.(*classify.CreatedView); view {
		return !sess.pins.has(classify.SessionTempTable) && !sess.pins.recheck
	}
	return true
}

// relayCatalogueRead passes the replies of a read sendCatalogueRead sent to it, until its
// ReadyForQuery; the client has what came before (its own ReadyForQuery) at once. A notification
// is the client's. When the connection fails meanwhile, the read fails and the connection is
// closed, so that the session's next unit meets a dead connection before anything runs (and is
// sent again elsewhere): the client has its answer already and must not get another. lost says
// so. An error is the client's: nothing of the read was read then. In read_your_writes user scope
// the client's answer waits until the read is taken in and the write position read
// (readAnnouncedPosition): the user's other connections may read as soon as the client has it,
// and they plan with the change told.
func (sess *session) relayCatalogueRead(be *backend, read *catalog.SessionRead) (lost bool, err error) {
	if sess.client.w.Buffered() > 0 && sess.readYourWritesScope() != config.ReadYourWritesUser {
		if err := sess.client.flush(); err != nil {
			return false, err
		}
	}
	for {
		typ, body, err := be.conn.Reader.ReadFrame()
		if err != nil {
			read.Fail(err)
			be.conn.NetConn().Close()
			return true, nil
		}
		switch typ {
		case wire.MsgNotificationResponse:
			sess.client.w.Write(appendFrame(sess.scratch[:0], typ, body))
		case wire.MsgReadyForQuery:
			if len(body) == 1 {
				be.conn.TxStatus = body[0]
			}
		}
		if read.Receive(typ, body) {
			if read.Err() != nil {
				// Prepared afresh next time (one of them may be what failed).
				for _, name := range read.StatementNames() {
					be.statements().drop(name)
				}
			}
			return false, nil
		}
	}
}

// idleForCatalogue reports whether the session is outside a transaction block.
func (sess *session) idleForCatalogue() bool {
	be := sess.held
	return be == nil || (be.conn != nil && be.conn.TxStatus == wire.TxIdle && !be.openBatch)
}

// refresh brings the classification context up to date with the session's settings: the startup
// search_path (or the database's default), then every session-level SET, RESET, DISCARD ALL or
// set_config of search_path that succeeded, in order.
func (st *classifierState) refresh(sess *session, c *classify.Classifier) {
	pending := len(sess.settings.pending)
	lastPending := ""
	if pending > 0 {
		lastPending = sess.settings.pending[pending-1]
	}
	if st.ready && st.setsSeen == sess.settings.key && st.pendingSeen == pending && st.lastPending == lastPending {
		return
	}
	st.ready = true
	st.setsSeen, st.pendingSeen, st.lastPending = sess.settings.key, pending, lastPending
	st.ctx.Database = sess.database
	st.ctx.User = sess.user
	startup := startupSearchPath(sess.login.Params)
	path, unknown := startup, false
	apply := func(sql string) {
		change := c.Classify(sql).SearchPath
		switch {
		case change == nil:
		case !change.Known:
			path, unknown = nil, true
		case change.Reset:
			path, unknown = startup, false
		default:
			// An empty path (SET search_path = '', or one read back as "") is no schema at all,
			// not the database's default (nil).
			path, unknown = nonNil(change.Schemas), false
		}
	}
	for _, sql := range sess.settings.sets {
		apply(sql)
	}
	for _, sql := range sess.settings.pending {
		apply(sql)
	}
	st.ctx.SearchPath, st.ctx.SearchPathUnknown = path, unknown
}

// startupSearchPath reads search_path from the startup parameters: the parameter itself, or
// -c search_path=... in options. nil means the database's default.
func startupSearchPath(params map[string]string) []string {
	if value, ok := params["search_path"]; ok {
		return nonNil(classify.SplitSearchPath(value))
	}
	options := params["options"]
	for _, prefix := range []string{"-c search_path=", "--search_path=", "-csearch_path="} {
		if at := strings.Index(options, prefix); at >= 0 {
			rest := options[at+len(prefix):]
			end := strings.Index(rest, " -")
			if end >= 0 {
				rest = rest[:end]
			}
			rest = strings.ReplaceAll(rest, `\ `, " ")
			return nonNil(classify.SplitSearchPath(rest))
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// routeReason maps a classify.Reason to the route.Reason a request carries. ok is false for a
// reason the router does not know, which must then be treated as UNKNOWN_EFFECT on the primary.
// HINT and OVERRIDE come with classify.Read (a standby) or, HINT only, classify.Write (the primary);
// NODE_LOCAL_STATS and NESTING_TOO_DEEP always come with classify.Write.
func routeReason(r classify.Reason) (route.Reason, bool) {
	switch r {
	case classify.ReasonReadOnly:
		return route.ReasonReadOnly, true
	case classify.ReasonWrite:
		return route.ReasonWrite, true
	case classify.ReasonRowLock:
		return route.ReasonRowLock, true
	case classify.ReasonWritingFunction:
		return route.ReasonWritingFunction, true
	case classify.ReasonUnknownEffect:
		return route.ReasonUnknownEffect, true
	case classify.ReasonNodeLocalStats:
		return route.ReasonNodeLocalStats, true
	case classify.ReasonHint:
		return route.ReasonHint, true
	case classify.ReasonNestingTooDeep:
		return route.ReasonNestingTooDeep, true
	case classify.ReasonOverride:
		return route.ReasonOverride, true
	}
	return route.ReasonUnknownEffect, false
}

// newClassifier builds the classifier from the configuration, with a function catalogue per
// database read from the current primary (as the monitor user) when the node states are known.
// The catalogue tells definitions of the changes it finds that no session told.
// defaultsChanged, when not nil, is told of a database whose logins' default settings changed
// (catalog.Options.DefaultsChanged).
func newClassifier(cfg config.Config, nodes NodeStates, logger zerolog.Logger, definitions *definitionChanges, defaultsChanged func(database string)) *classify.Classifier {
	opts := classify.Options{CacheSize: cfg.Classify.CacheSize, MaxDepth: cfg.Classify.MaxDepth}
	if cfg.Classify.CacheSize == 0 {
		opts.CacheSize = -1 // classify.cache_size: 0 disables the cache
	}
	if nodes != nil {
		opts.Catalogues = catalog.New(catalog.Options{
			Connect:            primaryConnector(cfg, nodes),
			NodeOf:             connectedNode,
			PrimaryNode:        primaryNode(cfg, nodes),
			Overrides:          catalog.Overrides{Readonly: cfg.Classify.Functions.Readonly, Writes: cfg.Classify.Functions.Writes},
			RefreshInterval:    cfg.Classify.RefreshInterval,
			ChangePollInterval: cfg.Classify.ChangePollInterval,
			Logger:             logger.With().Str("component", "catalog").Logger(),
			Found:              definitions.found,
			DefaultsChanged:    defaultsChanged,
		})
	}
	return classify.New(opts)
}

// connectedNode names the node a connection primaryConnector opened is to as the monitor's
// snapshot names it: host:port, as configured.
func connectedNode(conn *pgx.Conn) string {
	connected := conn.Config()
	return net.JoinHostPort(connected.Host, strconv.Itoa(int(connected.Port)))
}

// primaryAddr returns the host:port of the node the monitor finds primary now, as the monitor's
// snapshot gives it (a reload's node list included), or why none is found.
func primaryAddr(cfg config.Config, nodes NodeStates) func() (string, error) {
	policy := PolicyFromConfig(cfg)
	return func() (string, error) {
		snap := nodes.Snapshot()
		index, err := route.Primary(snap, policy, time.Now())
		if err != nil {
			return "", err
		}
		return snap.Nodes[index].Addr, nil
	}
}

// primaryNode names the node the monitor finds primary now as connectedNode names a
// connection's, or reports none found.
func primaryNode(cfg config.Config, nodes NodeStates) func() (string, bool) {
	addr := primaryAddr(cfg, nodes)
	return func() (string, bool) {
		primary, err := addr()
		return primary, err == nil
	}
}

// primaryConnector connects to a database on the current primary with the monitor's credentials.
func primaryConnector(cfg config.Config, nodes NodeStates) func(context.Context, string) (*pgx.Conn, error) {
	addr := primaryAddr(cfg, nodes)
	return func(ctx context.Context, database string) (*pgx.Conn, error) {
		primary, err := addr()
		if err != nil {
			return nil, fmt.Errorf("catalog: no primary to read the function catalogue from: %w", err)
		}
		host, port, err := net.SplitHostPort(primary)
		if err != nil {
			return nil, fmt.Errorf("catalog: primary address %q: %w", primary, err)
		}
		connString := nodetls.FromConfig(cfg.TLS.Nodes).ConnString(
			nodetls.Param{Key: "host", Value: host}, nodetls.Param{Key: "port", Value: port},
			nodetls.Param{Key: "user", Value: cfg.Monitor.User}, nodetls.Param{Key: "password", Value: cfg.Monitor.Password},
			nodetls.Param{Key: "dbname", Value: database}, nodetls.Param{Key: "application_name", Value: "pgowl catalogue"},
			nodetls.Param{Key: "connect_timeout", Value: strconv.Itoa(max(1, int(cfg.Pool.DialTimeout.Seconds())))})
		connConfig, err := pgx.ParseConfig(connString)
		if err != nil {
			return nil, err
		}
		connConfig.DialFunc = TCPOptions(cfg.TCP).DialFunc(cfg.Pool.DialTimeout)
		nodetls.FromConfig(cfg.TLS.Nodes).Apply(&connConfig.Config)
		return pgx.ConnectConfig(ctx, connConfig)
	}
}
