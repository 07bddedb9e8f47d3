package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// loginRefusal says why a connection may not start or finish its login.
type loginRefusal uint8

const (
	// admitted: the connection may go on.
	admitted loginRefusal = iota
	// tooManyLogins: limits.max_logins_in_progress connections are logging in already.
	tooManyLogins
	// tooManyLoginsFromAddress: the client's address holds its whole share of logins in progress
	// (limits.max_logins_in_progress_per_address).
	tooManyLoginsFromAddress
	// tooManyClients: limits.max_client_connections clients are logged in already.
	tooManyClients
	loginRefusalCount
)

// String names the limit behind a refusal, for logs and the client's message.
func (r loginRefusal) String() string {
	switch r {
	case admitted:
		return "admitted"
	case tooManyLogins:
		return "limits.max_logins_in_progress"
	case tooManyLoginsFromAddress:
		return "limits.max_logins_in_progress_per_address"
	case tooManyClients:
		return "limits.max_client_connections"
	default:
		return fmt.Sprintf("loginRefusal(%d)", uint8(r))
	}
}

// loginGate counts the connections that are logging in (from accept to the
// end of authentication and of the first node login), in all and per client
// address. Logged-in clients are counted apart (Server.clients), so a flood
// of sockets that never finish their login fills only its own address's
// share of the gate and locks nobody else out.
//
// A connection enters once, at accept, and leaves once, when its login ends
// either way: enter and leave are the only transitions.
type loginGate struct {
	maxTotal, maxPerAddress int

	mu      sync.Mutex
	total   int
	perAddr map[netip.Addr]int
}

func newLoginGate(maxTotal, maxPerAddress int) *loginGate {
	return &loginGate{maxTotal: maxTotal, maxPerAddress: maxPerAddress, perAddr: make(map[netip.Addr]int)}
}

// enter admits a login from addr, or says which limit refuses it.
func (g *loginGate) enter(addr netip.Addr) loginRefusal {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.maxTotal {
		return tooManyLogins
	}
	if g.perAddr[addr] >= g.maxPerAddress {
		return tooManyLoginsFromAddress
	}
	g.total++
	g.perAddr[addr]++
	return admitted
}

// leave ends a login that enter admitted.
func (g *loginGate) leave(addr netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if n := g.perAddr[addr] - 1; n > 0 {
		g.perAddr[addr] = n
	} else {
		delete(g.perAddr, addr)
	}
}

// inProgress reports the logins in progress, in all and from addr.
func (g *loginGate) inProgress(addr netip.Addr) (total, fromAddr int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total, g.perAddr[addr]
}

// clientAddr is the IP address a connection comes from, the key of its
// share of the logins in progress; connections that are not TCP share the
// zero address.
func clientAddr(conn net.Conn) netip.Addr {
	if tcp, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// loginEvent is a kind of failed login that is logged at info, rate-limited.
type loginEvent uint8

const (
	// loginRefused: a limit refused the connection (the detail names it).
	loginRefused loginEvent = iota
	// loginTimedOut: the client did not finish its login within limits.startup_timeout.
	loginTimedOut
	loginEventCount
)

func (e loginEvent) String() string {
	switch e {
	case loginRefused:
		return "login refused"
	case loginTimedOut:
		return "login timed out (limits.startup_timeout)"
	default:
		return fmt.Sprintf("loginEvent(%d)", uint8(e))
	}
}

// loginLogInterval is the least time between two log lines of one kind of failed login.
const loginLogInterval = time.Second

// loginLog writes failed logins at info level, at most one line per kind
// every loginLogInterval, so that a flood neither fills the log nor goes
// unseen: each line's count says how many logins it stands for, and the
// logins held back after a line are written as one line when the interval
// has passed.
type loginLog struct {
	log zerolog.Logger

	mu      sync.Mutex
	last    [loginEventCount]time.Time
	held    [loginEventCount]int
	heldFor [loginEventCount]string // the detail of the latest held login
	pending [loginEventCount]bool   // a flush of the held logins is scheduled
}

// note logs one failed login of kind ev from addr, or holds it back when a
// line of its kind was written less than loginLogInterval ago.
func (l *loginLog) note(ev loginEvent, addr netip.Addr, detail string) {
	now := time.Now()
	l.mu.Lock()
	if wait := loginLogInterval - now.Sub(l.last[ev]); wait > 0 {
		l.held[ev]++
		l.heldFor[ev] = detail
		if !l.pending[ev] {
			l.pending[ev] = true
			time.AfterFunc(wait, func() { l.flush(ev) })
		}
		l.mu.Unlock()
		return
	}
	l.last[ev] = now
	l.mu.Unlock()
	l.log.Info().Str("client_ip", addr.String()).Str("detail", detail).Int("count", 1).Msg(ev.String())
}

// flush writes the logins of kind ev held back since the last line.
func (l *loginLog) flush(ev loginEvent) {
	l.mu.Lock()
	n, detail := l.held[ev], l.heldFor[ev]
	l.held[ev], l.pending[ev] = 0, false
	if n > 0 {
		l.last[ev] = time.Now()
	}
	l.mu.Unlock()
	if n > 0 {
		l.log.Info().Str("detail", detail).Int("count", n).Msg(ev.String())
	}
}
