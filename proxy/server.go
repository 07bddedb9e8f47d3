package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/nodetls"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/access"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/tcpopt"
)

// NodeStates is what the proxy needs from the node monitor.
type NodeStates interface {
	// Snapshot returns the latest node states without blocking.
	Snapshot() *route.Snapshot
	// WaitFor blocks until cond holds for a new snapshot or ctx ends.
	WaitFor(ctx context.Context, cond func(*route.Snapshot) bool) bool
}

// Options are everything a Server needs, built by the caller from the config.
type Options struct {
	Config     config.Config
	Logger     zerolog.Logger
	Nodes      NodeStates
	Classifier *classify.Classifier
	Pool       *pool.Pool
	Auth       *auth.Store
	// TLS, when set, lets clients upgrade with SSLRequest.
	TLS *tls.Config
	// Access decides who may log in from where, and how; nil admits every user with its own method.
	Access *access.Rules
	// Observer, when set, is told about every routed unit (metrics, history).
	Observer UnitObserver
	// Console, when set, answers clients of the database pgowl who log in
	// with ConsoleAuth (the admin users).
	Console     AdminConsole
	ConsoleAuth *auth.Store
	// definitions, when set, is the registry the classifier's catalogue
	// tells of the changes it finds (Run sets both); NewServer makes one
	// otherwise.
	definitions *definitionChanges
}

// Server accepts client connections and runs their sessions.
//
// Its state machine: serving (Serve accepts and sessions run), then, when
// Serve's context ends, draining (new clients are told 57P01; a session ends
// at its first message outside a transaction; the monitor keeps running),
// then, at shutdown_timeout, forced (running statements are cancelled, open
// transactions rolled back and their clients told so), then stopped.
// Independently, pause holds new units while it is closed (PAUSE/RESUME).
type Server struct {
	opts Options
	log  zerolog.Logger
	// settings is the configuration in force; Reload swaps it whole.
	settings atomic.Pointer[liveSettings]

	nextConnID atomic.Uint64
	// clients counts logged-in clients (limits.max_client_connections);
	// logins counts those still logging in, in all and per address.
	clients  atomic.Int64
	logins   *loginGate
	loginLog *loginLog
	// courteousRefusals counts the refused connections read for their startup
	// packet before their refusal (see refuseLogin).
	courteousRefusals atomic.Int64
	// statementNames names client statements on backend connections (statement_registry.go).
	statementNames managedNames
	// transactionPooling gives backends back to the pool after every unit
	// that leaves nothing on them (pool.mode: transaction). A reload cannot change it.
	transactionPooling bool

	// serveCtx is Serve's context: admin console sessions end with it.
	serveCtx context.Context
	// shutdown follows the drain that starts when serveCtx ends.
	shutdown shutdownState
	// pause holds new units between PAUSE and RESUME.
	pause pauseGate

	// instance is peering.instance (0: peering off), carried in every cancel key handed
	// out; peers maps the other instances' numbers to their peering listeners.
	instance int
	peers    map[int]string
	// peerTLS secures the cancels passed on to peers (peering.tls).
	peerTLS nodetls.Settings

	// guards counts guarded statements in flight and keeps cost verdicts.
	guards guardState
	// userWrites are the write positions shared per user and database
	// (routing.read_your_writes: user).
	userWrites userWritePositions
	// definitions are the definition changes sessions made, or the catalogue
	// found, that a standby may not have replayed yet (definition_changes.go).
	definitions *definitionChanges
	// nodeLoginRefusals are the standbys that refused a login a moment ago.
	nodeLoginRefusals nodeLoginRefusals

	mu       sync.Mutex
	sessions map[cancelKey]*session
	wg       sync.WaitGroup
}

type cancelKey struct {
	pid    uint32
	secret uint32
}

// NewServer checks opts and returns a Server.
func NewServer(opts Options) (*Server, error) {
	if opts.Nodes == nil || opts.Classifier == nil || opts.Pool == nil || opts.Auth == nil {
		return nil, errors.New("proxy: Nodes, Classifier, Pool and Auth are required")
	}
	if opts.Console != nil && opts.ConsoleAuth == nil {
		return nil, errors.New("proxy: a Console needs ConsoleAuth")
	}
	if opts.definitions == nil {
		opts.definitions = &definitionChanges{}
	}
	s := &Server{
		opts:        opts,
		log:         opts.Logger,
		sessions:    make(map[cancelKey]*session),
		definitions: opts.definitions,

		logins:   newLoginGate(opts.Config.Limits.MaxLoginsInProgress, opts.Config.Limits.MaxLoginsInProgressPerAddress),
		loginLog: &loginLog{log: opts.Logger},

		transactionPooling: opts.Config.Pool.Mode != "session",
		instance:           opts.Config.Peering.Instance,
		peers:              peerAddresses(opts.Config.Peering),
		peerTLS:            nodetls.ForPeers(opts.Config.Peering.TLS),
	}
	s.settings.Store(newLiveSettings(opts.Config, opts.Auth, opts.ConsoleAuth, opts.TLS, opts.Access))
	return s, nil
}

// TCPOptions turns the tcp section of the config into socket options, for
// client connections and for the pool's connections to the nodes.
func TCPOptions(cfg config.TCP) tcpopt.Options {
	return tcpopt.Options{
		KeepaliveIdle:     cfg.KeepaliveIdle,
		KeepaliveInterval: cfg.KeepaliveInterval,
		KeepaliveCount:    cfg.KeepaliveCount,
		UserTimeout:       cfg.UserTimeout,
	}
}

// PolicyFromConfig turns the routing section of the config into a route.Policy.
func PolicyFromConfig(cfg config.Config) route.Policy {
	p := route.Policy{
		MaxReplicaLag:      cfg.Routing.MaxReplicaLag,
		MaxReplicaLagBytes: cfg.Routing.MaxReplicaLagBytes,
		DownAfter:          cfg.Monitor.DownAfter,
	}
	switch cfg.Routing.StandbyChoice {
	case "round_robin":
		p.StandbyChoice = route.RoundRobin
	case "least_connections":
		p.StandbyChoice = route.LeastConnections
	default:
		p.StandbyChoice = route.LeastLag
	}
	if cfg.Routing.WhenNoStandby == "primary" {
		p.WhenNoStandby = route.UsePrimary
	}
	p.ReadYourWritesReject = cfg.Routing.ReadYourWritesFallback == config.WhenNoStandbyReject
	return p
}

// Serve accepts connections on ln until ctx is cancelled, then drains: it
// answers new connections with 57P01 and gives sessions shutdown_timeout to
// finish their transactions (see drain). Sessions run on a context that ctx
// does not cancel, so that statements in flight are not cut by the shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.serveCtx = ctx
	sessionCtx := context.WithoutCancel(ctx)
	drained := make(chan struct{})
	go func() {
		<-ctx.Done()
		grace := s.live().cfg.ShutdownTimeout
		s.log.Info().Dur("shutdown_timeout", grace).Int("sessions", s.sessionCount()).
			Msg("pgowl is shutting down: new clients are refused, sessions end after their transaction")
		s.drain(grace)
		ln.Close()
		report := s.Shutdown()
		s.log.Info().Int64("cancelled", report.Cancelled).Int64("rolled_back", report.RolledBack).Int64("closed", report.Closed).Msg("pgowl drained: every session has ended")
		close(drained)
	}()
	go s.watchUnresponsiveNodes(ctx)
	var tempDelay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				<-drained
				return nil
			}
			if acceptRetriable(err) {
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), maxAcceptDelay)
				s.log.Warn().Err(err).Dur("retry_in", tempDelay).Msg("accept failed; retrying")
				time.Sleep(tempDelay)
				continue
			}
			return err
		}
		tempDelay = 0
		if s.shutdown.draining.Load() {
			go func() {
				defer conn.Close()
				s.refuseWhileShuttingDown(conn)
			}()
			continue
		}
		addr := clientAddr(conn)
		if refusal := s.admit(addr); refusal != admitted {
			s.refuseLogin(conn, addr, refusal)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(sessionCtx, conn, addr)
		}()
	}
}

// maxAcceptDelay bounds the pause after a failed accept: short, so that a
// burst of connections that used up the process's descriptors (a flood of
// silent sockets, refused and closed within a second) delays the logins
// waiting behind it by little.
const maxAcceptDelay = 100 * time.Millisecond

// acceptRetriable reports an accept error that passes: a timeout, running
// out of descriptors or memory, or a connection reset before it was accepted.
// Any other ends Serve.
func acceptRetriable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// ActiveClients reports the number of logged-in clients.
func (s *Server) ActiveClients() int64 { return s.clients.Load() }

func (s *Server) register(sess *session) (cancelKey, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return cancelKey{}, err
		}
		k := cancelKey{pid: binary.BigEndian.Uint32(b[:4]) & 0x7fffffff, secret: binary.BigEndian.Uint32(b[4:])}
		if s.instance != 0 {
			k.pid = uint32(s.instance)<<peerInstanceShift | k.pid&(1<<peerInstanceShift-1)
		}
		if k.pid == 0 {
			continue
		}
		s.mu.Lock()
		if _, taken := s.sessions[k]; !taken {
			s.sessions[k] = sess
			s.mu.Unlock()
			return k, nil
		}
		s.mu.Unlock()
	}
}

func (s *Server) unregister(k cancelKey) {
	s.mu.Lock()
	delete(s.sessions, k)
	s.mu.Unlock()
}

// cancelWaitsForCatalogueRead bounds how long a cancel request for a statement sent behind its
// session's catalogue read waits for the read to be read (it normally takes well under a
// millisecond); past it, the request is passed on all the same (it cancels the read, which frees
// the connection), and the session passes on another for the statement once the read is read.
const cancelWaitsForCatalogueRead = 2 * time.Second

// cancel passes a client's CancelRequest on to the backend running its statement. It reports
// whether a statement was running and its node took the request.
func (s *Server) cancel(k cancelKey) bool {
	s.mu.Lock()
	sess := s.sessions[k]
	s.mu.Unlock()
	if sess == nil {
		return false
	}
	return sess.passOnCancel()
}

// passOnCancel sends a CancelRequest for the statement the session is
// running, if any, to its node, and waits until the node has taken it.
func (sess *session) passOnCancel() (sent bool) {
	// Until the node has taken the request, the session keeps the backend
	// from the pool: a cancel that arrives after the statement finished
	// reaches an idle backend, which ignores it, never the next session's
	// statement on that backend.
	sess.cancelling.Lock()
	defer sess.cancelling.Unlock()
	if sess.cancelHeld() {
		return false // held by PAUSE: it ends without running
	}
	run := sess.running.Load()
	if run == nil {
		return false // nothing running: a late cancel must not hit anyone else's work
	}
	return sess.sendCancel(run)
}

// cancelIfStillRunning is passOnCancel for a limit's timer armed for the statement numbered
// started (statementStarted's number): it acts only if that
// statement still runs, and then calls acting first (to record and log why). A client's
// cancel request is about whatever the session does when it arrives; a timer is about one
// statement, and firing late it must not cancel the next one or end a unit PAUSE holds.
func (sess *session) cancelIfStillRunning(started uint64, acting func()) {
	sess.cancelling.Lock()
	defer sess.cancelling.Unlock()
	run := sess.running.Load()
	if run == nil || sess.runs.Load() != started {
		return
	}
	acting()
	sess.sendCancel(run)
}

// sendCancel sends a CancelRequest for run to its node and waits until the node has taken it;
// the caller holds sess.cancelling.
func (sess *session) sendCancel(run *runningStatement) (sent bool) {
	if run.behindRead != nil {
		// The statement follows the session's catalogue read on the connection: a cancel
		// now would reach the read (which then fails) and leave the statement running.
		select {
		case <-run.behindRead:
		case <-time.After(cancelWaitsForCatalogueRead):
			run.cancelAfterRead.Store(true) // this request cancels the read; the session sends another
		}
	}
	// Over TLS when the node's other connections are (tls.nodes): the backend's secret key does
	// not cross the network in the clear.
	nodeTLS := nodetls.Settings{SSLMode: config.SSLDisable} // a Server without settings (tests)
	host := ""                                              // the node's configured host: verify-full checks it
	if live := sess.srv.live(); live != nil {
		nodeTLS = nodetls.FromConfig(live.cfg.TLS.Nodes)
		for _, n := range live.cfg.Nodes {
			if n.Name == run.node {
				host = n.Host
			}
		}
	}
	dialCtx, dialCancel := context.WithTimeout(context.Background(), cancelRequestTimeout)
	c, err := nodeTLS.DialCancel(dialCtx, run.network, run.address, host)
	dialCancel()
	if err != nil {
		sess.log.Warn().Err(err).Str("node", run.node).Msg("could not pass on cancel request")
		return
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(cancelRequestPacket(run.pid, run.secret)); err != nil {
		sess.log.Warn().Err(err).Str("node", run.node).Msg("could not pass on cancel request")
		return
	}
	// The server closes the connection when it has processed the request.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var one [1]byte
	c.Read(one[:])
	sess.log.Info().Str("node", run.node).Uint32("backend_pid", run.pid).Msg("cancel request passed on")
	return true
}
