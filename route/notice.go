package route

import (
	"strconv"
	"time"
	"unicode"
)

// NoticeMessage says in words where the statement ran and why, for the
// NOTICE the proxy sends before the statement's results. maxLag is the limit
// the decision was checked against (see EffectiveMaxLag); it only appears in
// the READ_ONLY and FALLBACK_PRIMARY wordings and is left out when not positive.
func (d Decision) NoticeMessage(maxLag time.Duration) string {
	return string(d.AppendNoticeMessage(nil, maxLag))
}

// AppendNoticeMessage appends NoticeMessage's text to dst, so that a session
// can render it into a buffer it reuses.
func (d Decision) AppendNoticeMessage(dst []byte, maxLag time.Duration) []byte {
	b := noticeText(dst)
	b.WriteString("pgowl: ")
	b.WriteString(d.Node)
	b.WriteString(" (")
	b.WriteString(d.Role.String())
	b.WriteString(") ran this statement: ")
	switch d.Reason {
	case ReasonReadOnly:
		b.WriteString("it only reads")
		writeLag(&b, d, maxLag)
	case ReasonWrite:
		b.WriteString("it writes")
		writeSubject(&b, d.Subject)
	case ReasonRowLock:
		b.WriteString("it locks rows")
		writeSubject(&b, d.Subject)
	case ReasonWritingFunction:
		if d.Subject == "" {
			b.WriteString("it calls a function that writes")
		} else {
			b.WriteString("it calls ")
			b.WriteString(d.Subject)
			b.WriteString(", which writes")
		}
	case ReasonUnknownEffect:
		if d.Subject == "" {
			b.WriteString("its effect is unknown")
		} else {
			b.WriteString("the effect of ")
			b.WriteString(d.Subject)
			b.WriteString(" is unknown")
		}
		b.WriteString(", so it ran on the primary")
	case ReasonInTransaction:
		b.WriteString("it is part of a transaction that started on ")
		b.WriteString(d.Node)
	case ReasonFallbackPrimary:
		b.WriteString("it only reads, but ")
		switch {
		case d.LoginRefused != "":
			writeNodeList(&b, d.LoginRefused)
			b.WriteString(" refused this session's login: the role or database is not replayed there yet, or it is not accepting connections")
		case d.FallbackRule == codeNames[NoReadableReplica]:
			b.WriteString("no standby is up")
		case d.FallbackRule == codeNames[ReplicaLagExceeded]:
			b.WriteString("no standby's lag is within ")
			if maxLag > 0 {
				b.writeDuration(maxLag)
			} else {
				b.WriteString("the limit")
			}
		default:
			b.WriteString("no standby qualified")
		}
		if d.FallbackRule != "" {
			b.WriteString(" (")
			b.WriteString(d.FallbackRule)
			b.WriteString(")")
		}
		b.WriteString(", so it fell back to the primary")
	case ReasonNoStandbyConfigured:
		b.WriteString("it only reads, but no standby is configured")
	case ReasonSessionPinned:
		b.WriteString("the session is pinned to ")
		b.WriteString(d.Node)
		writeSubject(&b, d.Subject)
	case ReasonNodeLocalStats:
		b.WriteString("it reads statistics or state that each node keeps for itself")
		writeSubject(&b, d.Subject)
		b.WriteString(", so it ran on the primary")
	case ReasonHint:
		if d.Role == RoleStandby {
			b.WriteString("its ")
			if d.Subject != "" {
				b.WriteString(d.Subject)
			} else {
				b.WriteString("/*pgowl:readonly*/ hint")
			}
			b.WriteString(" asserts that it only reads")
			writeLag(&b, d, maxLag)
		} else {
			b.WriteString("its ")
			if d.Subject != "" {
				b.WriteString(d.Subject)
			} else {
				b.WriteString("/*pgowl:primary*/ hint")
			}
			b.WriteString(" sends it to the primary")
		}
	case ReasonNestingTooDeep:
		b.WriteString("its functions nest too deeply to analyse")
		writeSubject(&b, d.Subject)
		b.WriteString(", so it ran on the primary")
	case ReasonOverride:
		b.WriteString("it only reads, as asserted")
		writeSubject(&b, d.Subject)
		writeLag(&b, d, maxLag)
	case ReasonReadYourWrites:
		b.WriteString("it only reads, but ")
		if d.Behind != "" {
			b.WriteString(d.Behind)
		} else {
			b.WriteString("no standby")
		}
		b.WriteString(" had not replayed ")
		b.WriteString(readAfterWhat(d.ReadAfterChange, d.ReadAfterChanged))
		b.WriteString(" (")
		b.writeLSN(d.ReadAfter)
		if d.NodeReplay != 0 {
			b.WriteString("; it is at ")
			b.writeLSN(d.NodeReplay)
		}
		b.WriteString(")")
	default:
		b.WriteString("reason ")
		b.WriteString(d.Reason.String())
	}
	return b
}

// writeNodeList writes a comma-joined list of node names ("pg2,pg3") as
// words ("pg2, pg3").
func writeNodeList(b *noticeText, names string) {
	for i := 0; i < len(names); i++ {
		*b = append(*b, names[i])
		if names[i] == ',' {
			*b = append(*b, ' ')
		}
	}
}

// writeLag adds a standby's lag, as in the READ_ONLY wording.
func writeLag(b *noticeText, d Decision, maxLag time.Duration) {
	if d.Role != RoleStandby || !d.LagKnown {
		return
	}
	b.WriteString(", and ")
	b.WriteString(d.Node)
	b.WriteString("'s lag ")
	b.writeDuration(d.Lag)
	if maxLag > 0 {
		b.WriteString(" is within ")
		b.writeDuration(maxLag)
	}
}

func writeSubject(b *noticeText, subject string) {
	if subject == "" {
		return
	}
	b.WriteString(" (")
	b.WriteString(subject)
	b.WriteString(")")
}

// NoticeDetail renders the decision for tools. It begins exactly
// "node=<name> role=<role> reason=<CODE> lag_ms=<n>", where lag_ms is the
// chosen node's effective lag (0 for a primary, -1 if unknown), and may append
// " fallback=<CODE>", " login_refused=<node>[,<node>...]" (FALLBACK_PRIMARY
// because those standbys refused the session's login) and " subject=<subject>"; a subject containing spaces,
// quotes, '=' or non-printing characters is quoted Go-style. A read that had
// to see the session's last write ends with " wait_lsn=<X/Y>" and, when the
// chosen standby's (or for READ_YOUR_WRITES the lacking standby's) replay
// position is known, " node_lsn=<X/Y>".
func (d Decision) NoticeDetail() string {
	return string(d.AppendNoticeDetail(nil))
}

// AppendNoticeDetail appends NoticeDetail's text to dst.
func (d Decision) AppendNoticeDetail(dst []byte) []byte {
	b := noticeText(dst)
	b.WriteString("node=")
	b.WriteString(d.Node)
	b.WriteString(" role=")
	b.WriteString(d.Role.String())
	b.WriteString(" reason=")
	b.WriteString(d.Reason.String())
	b.WriteString(" lag_ms=")
	switch {
	case d.Role == RolePrimary:
		b.WriteString("0")
	case !d.LagKnown:
		b.WriteString("-1")
	default:
		b = strconv.AppendInt(b, d.Lag.Milliseconds(), 10)
	}
	if d.FallbackRule != "" {
		b.WriteString(" fallback=")
		b.WriteString(d.FallbackRule)
	}
	if d.LoginRefused != "" {
		b.WriteString(" login_refused=")
		b.WriteString(d.LoginRefused)
	}
	if d.Subject != "" {
		b.WriteString(" subject=")
		if needsQuoting(d.Subject) {
			b = strconv.AppendQuote(b, d.Subject)
		} else {
			b.WriteString(d.Subject)
		}
	}
	if d.ReadAfter != 0 {
		b.WriteString(" wait_lsn=")
		b.writeLSN(d.ReadAfter)
		if d.NodeReplay != 0 {
			b.WriteString(" node_lsn=")
			b.writeLSN(d.NodeReplay)
		}
	}
	return b
}

// noticeText is a NOTICE's text under construction, appended in place.
type noticeText []byte

func (b *noticeText) WriteString(s string) { *b = append(*b, s...) }

// writeLSN appends a WAL position in its text form.
func (b *noticeText) writeLSN(l LSN) { *b = l.Append(*b) }

// writeDuration appends d as formatDuration renders it.
func (b *noticeText) writeDuration(d time.Duration) { *b = appendDuration(*b, d) }

func needsQuoting(s string) bool {
	for _, r := range s {
		if r == '"' || r == '=' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}
