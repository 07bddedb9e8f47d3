package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
)

// logUnit writes the routing-log line of one routed unit.
func (sess *session) logUnit(u *unit, dec route.Decision, outcome string) {
	if sess.labelsRead() {
		u.effects.Label() // done already when u was sent (exchangeOn)
	}
	sess.last = lastUnit{effects: u.effects, decision: dec, outcome: outcome, valid: true, guard: u.guard.explainText(dec.Node, outcome)}
	eff := &sess.last.effects
	if u.prepareOnly {
		// Nothing executes: a read's is told as the read it was planned as, a write's with
		// the subject that says it was prepared where it will run.
		req := unitStatement(u).Request()
		if req.Access == route.AccessRead {
			eff.Access, eff.Reason = classify.Read, classify.ReasonReadOnly
		}
		eff.Subject = req.Subject
	}
	ev := sess.log.Info()
	observed := sess.srv.opts.Observer != nil
	if !ev.Enabled() && !observed {
		return
	}
	reason := dec.Reason.String()
	if dec.Node == "" {
		// Not routed: the reason is the statement's own effect.
		reason = eff.Reason.String()
	}
	duration := time.Since(u.start)
	p := sess.srv.live().cfg.Routing.AICommentPrefix
	ai := p != "" && strings.HasPrefix(strings.TrimLeft(u.sql, " \t\r\n"), p)
	if observed {
		sess.observeUnit(u, dec, reason, outcome, ai, duration)
	}
	if !ev.Enabled() {
		return
	}
	ev = ev.Str("node", dec.Node).
		Str("role", dec.Role.String()).
		Str("reason", reason).
		Int64("lag_ms", dec.Lag.Milliseconds()).
		Float64("duration_ms", milliseconds(duration)).
		Str("outcome", outcome).
		Str("fingerprint", eff.Fingerprint).
		Str("statement", eff.Normalized)
	if dec.Subject != "" {
		ev = ev.Str("subject", dec.Subject)
	}
	if dec.FallbackRule != "" {
		ev = ev.Str("fallback_rule", dec.FallbackRule)
	}
	if dec.LoginRefused != "" {
		// The standbys that refused the session's login (FALLBACK_PRIMARY).
		ev = ev.Str("login_refused", dec.LoginRefused)
	}
	if g := &u.guard; g.cfg != nil {
		ev = ev.Str("guard", g.cfg.Name)
		if v := g.verdict; v != nil {
			ev = ev.Float64("cost", v.total).Float64("cost_limit", g.limit).Bool("cost_cached", g.cached).
				Float64("cost_check_ms", milliseconds(g.checkTime)).Interface("plan_nodes", v.nodes)
		}
	}
	if dec.ReadAfter != 0 {
		// Read your writes: the position the read waited for, and what the
		// standby had (for READ_YOUR_WRITES, the standby that lacked it).
		ev = ev.Stringer("wait_lsn", dec.ReadAfter)
		if dec.NodeReplay != 0 {
			ev = ev.Stringer("node_lsn", dec.NodeReplay)
		}
		if dec.ReadAfterChange {
			// The position was a definition change's the read rests on, not the session's write.
			ev = ev.Bool("wait_for_definition", true)
			if dec.ReadAfterChanged != "" {
				ev = ev.Str("changed", dec.ReadAfterChanged)
			}
		}
		if dec.Behind != "" {
			ev = ev.Str("behind", dec.Behind)
		}
	}
	ev.Bool("ai", ai).Msg("routed")
}

// labelsRead reports whether a unit's labels (its fingerprint and normalised text, two more runs
// of the parser) will be read when it is logged: by the routing log's info line or by the
// observer (history, metrics). When neither is on, they are computed only if SHOW pgowl.explain
// asks for them.
func (sess *session) labelsRead() bool {
	return sess.srv.opts.Observer != nil ||
		(sess.log.GetLevel() <= zerolog.InfoLevel && zerolog.GlobalLevel() <= zerolog.InfoLevel)
}

// lastUnit remembers the session's last routed unit for SHOW pgowl.explain.
type lastUnit struct {
	effects  classify.Effects
	decision route.Decision
	outcome  string
	valid    bool
	// guard is the guard's verdict (unitGuard.explainText); "" for business traffic.
	guard string
}

// explain is the SHOW pgowl.explain text for the last unit.
func (l *lastUnit) explain() string {
	if !l.valid {
		return "no statement has been routed in this session yet"
	}
	l.effects.Label() // left to be computed when nothing else read them (labelsRead)
	eff, dec := &l.effects, &l.decision
	if dec.Node == "" {
		text := fmt.Sprintf("not routed: %s; effect=%s reason=%s subject=%q statement=%q", l.outcome, eff.Access, eff.Reason, eff.Subject, eff.Normalized)
		if l.guard != "" {
			text += "\nguard: " + l.guard
		}
		return text
	}
	text := fmt.Sprintf("node=%s role=%s reason=%s lag_ms=%d subject=%q effect=%s outcome=%s statement=%q",
		dec.Node, dec.Role, dec.Reason, dec.Lag.Milliseconds(), dec.Subject, eff.Access, l.outcome, eff.Normalized)
	if dec.ReadAfter != 0 {
		text += " wait_lsn=" + dec.ReadAfter.String()
		if dec.NodeReplay != 0 {
			text += " node_lsn=" + dec.NodeReplay.String()
		}
		if dec.Behind != "" {
			text += " behind=" + dec.Behind
		}
		if dec.ReadAfterChange {
			text += " wait_for_definition=" + strconv.Quote(dec.ReadAfterChanged)
		}
	}
	if dec.LoginRefused != "" {
		text += " login_refused=" + dec.LoginRefused
	}
	if chain := eff.ChainString(); chain != "" {
		text += "\nchain: " + chain
	}
	for _, w := range eff.Warnings {
		text += "\nwarning: " + w
	}
	if l.guard != "" {
		text += "\nguard: " + l.guard
	}
	return text
}

// milliseconds gives d in milliseconds to the microsecond, as the log's *_ms fields hold it.
func milliseconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
