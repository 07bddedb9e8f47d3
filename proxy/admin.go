package proxy

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/admin"
	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/proxy/auth"
	"github.com/pgowl/pgowl/route"
)

// UnitObserver is told about every routed unit, after its routing-log line;
// admin.Recorder is one. Routed runs on the session's goroutine and must be cheap.
type UnitObserver interface {
	Routed(u admin.Unit)
}

// AdminConsole answers clients that log in to the database pgowl
// (config.AdminDatabase); admin.Recorder is one.
type AdminConsole interface {
	ServeConsole(c admin.ConsoleConn, user string) error
}

// observeUnit hands a unit's record to the observer, if there is one.
func (sess *session) observeUnit(u *unit, dec route.Decision, reason, outcome string, ai bool, duration time.Duration) {
	obs := sess.srv.opts.Observer
	if obs == nil {
		return
	}
	rec := admin.Unit{
		Time:         u.start.Add(duration),
		ConnID:       sess.id,
		User:         sess.user,
		Database:     sess.database,
		Application:  sess.loginApplication,
		Node:         dec.Node,
		Role:         dec.Role,
		Reason:       reason,
		FallbackRule: dec.FallbackRule,
		Lag:          dec.Lag,
		Outcome:      outcome,
		Duration:     duration,
		Decision:     u.decideTime,
		Fingerprint:  u.effects.Fingerprint,
		Statement:    u.effects.Normalized,
		AI:           ai,
	}
	if dec.Node == "" || u.guard.cfg != nil && u.routeErr != nil {
		// Not routed, or a guard refused it on its node (QUERY_COST_EXCEEDED).
		rec.Refusal = refusalCode(u.routeErr, outcome)
	}
	obs.Routed(rec)
}

// refusalCode names why no node ran a unit: the routing code when there is
// one, else the SQLSTATE the client got.
func refusalCode(err error, outcome string) string {
	var re *route.Error
	var busy *pool.BusyError
	switch {
	case errors.As(err, &re):
		return re.Code.String()
	case errors.As(err, &busy):
		return route.DatabaseBusy.String()
	}
	return outcome
}

// Clients lists the connected clients (after their login), for the admin side.
func (s *Server) Clients() []admin.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]admin.Client, 0, len(s.sessions))
	for _, sess := range s.sessions {
		out = append(out, admin.Client{
			ConnID:      sess.id,
			User:        sess.user,
			Database:    sess.database,
			Application: sess.application(),
			Addr:        sess.client.conn.RemoteAddr().String(),
			Active:      sess.running.Load() != nil,
			TLS:         sess.client.tls,
		})
	}
	return out
}

// serveConsole authenticates a client of the admin database against the
// admin users only (anyone else gets the unknown-user answer, 28P01) and
// runs the console. It returns false: the connection closes after it.
func (sess *session) serveConsole() bool {
	srv := sess.srv
	if err := srv.live().consoleAuth.Authenticate(clientAuthConn{sess}, sess.user, rand.Reader); err != nil {
		reason := err.Error()
		var ae *auth.Error
		if errors.As(err, &ae) && ae.Reason != "" {
			reason = ae.Reason
		}
		sess.log.Warn().Str("reason", reason).Msg("admin console authentication failed")
		sess.fail(err)
		return false
	}
	sess.client.conn.SetDeadline(time.Time{})
	stop := context.AfterFunc(srv.serveCtx, func() { sess.client.conn.Close() })
	defer stop()
	sess.log.Info().Msg("admin console session")
	if err := srv.opts.Console.ServeConsole(consoleConn{sess}, sess.user); err != nil {
		sess.log.Debug().Err(err).Msg("admin console session ended")
	}
	return false
}

// consoleConn adapts a session's client connection to admin.ConsoleConn.
type consoleConn struct{ sess *session }

func (c consoleConn) ReadMessage() (byte, []byte, error) { return c.sess.client.r.ReadFrame() }
func (c consoleConn) Send(msg pgproto3.BackendMessage) error {
	return c.sess.send(msg)
}
func (c consoleConn) Flush() error { return c.sess.client.w.Flush() }

// consoleAuthStore returns the credentials of the admin users only.
func consoleAuthStore(cfg config.Config, all []*auth.Credentials) *auth.Store {
	var creds []*auth.Credentials
	for _, c := range all {
		for _, name := range cfg.Admin.Users {
			if c.User() == name {
				creds = append(creds, c)
			}
		}
	}
	return auth.NewStore(creds...)
}
