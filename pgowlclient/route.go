package pgowlclient

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Role is the role of the node that ran a statement, as pgowl's NOTICE names it.
type Role string

const (
	// RolePrimary is the primary: it ran a write, or a read that needed it.
	RolePrimary Role = "primary"
	// RoleStandby is a standby: it ran a read within the lag limit.
	RoleStandby Role = "standby"
)

// Route is where pgowl ran one routed unit (a simple Query, or an
// extended-protocol batch up to Sync) and why: the content of its routing
// NOTICE, which a caller can store beside its own history of executed SQL.
type Route struct {
	// Node is the node's name in pgowl's configuration, such as "pg2".
	Node string
	// Role is the node's role when pgowl chose it.
	Role Role
	// Reason is pgowl's reason code, such as READ_ONLY or WRITE.
	Reason string
	// LagMS is the node's staleness in milliseconds as pgowl knew it: 0 for
	// a primary, -1 when unknown.
	LagMS int64
	// Fallback names the rule that sent a read to the primary (fallback=), if any.
	Fallback string
	// Subject is what the reason is about (subject=), such as a function or
	// the statement's kind, if any.
	Subject string
	// Extra holds the DETAIL's other key=value fields, those this package
	// does not name (for example guard=, cost=, wait_lsn=, node_lsn=).
	Extra map[string]string
	// Message is the NOTICE's text in words.
	Message string
}

// LagKnown reports whether pgowl knew the node's lag.
func (r Route) LagKnown() bool { return r.LagMS >= 0 }

// String renders the route the way the DETAIL begins.
func (r Route) String() string {
	return fmt.Sprintf("node=%s role=%s reason=%s lag_ms=%d", r.Node, r.Role, r.Reason, r.LagMS)
}

// routeDetailStart is the fixed start of a routing NOTICE's DETAIL, in order.
var routeDetailStart = [...]string{"node", "role", "reason", "lag_ms"}

// ParseRouteDetail parses the DETAIL of pgowl's routing NOTICE. It must begin
// exactly "node=<name> role=<role> reason=<CODE> lag_ms=<n>"; any further
// key=value fields are accepted, the known ones (fallback, subject) into
// their fields and the others into Extra.
func ParseRouteDetail(detail string) (Route, error) {
	fields, err := parseFields(detail)
	if err != nil {
		return Route{}, fmt.Errorf("pgowlclient: routing NOTICE DETAIL %q: %w", abbreviate(detail), err)
	}
	if len(fields) < len(routeDetailStart) {
		return Route{}, fmt.Errorf("pgowlclient: routing NOTICE DETAIL %q: want it to begin node= role= reason= lag_ms=", abbreviate(detail))
	}
	for i, key := range routeDetailStart {
		if fields[i].key != key {
			return Route{}, fmt.Errorf("pgowlclient: routing NOTICE DETAIL %q: field %d is %s=, want %s=", abbreviate(detail), i+1, fields[i].key, key)
		}
	}
	r := Route{Node: fields[0].value, Role: Role(fields[1].value), Reason: fields[2].value}
	if r.Node == "" || r.Reason == "" {
		return Route{}, fmt.Errorf("pgowlclient: routing NOTICE DETAIL %q: empty node or reason", abbreviate(detail))
	}
	if r.Role != RolePrimary && r.Role != RoleStandby {
		return Route{}, fmt.Errorf("pgowlclient: routing NOTICE DETAIL %q: unknown role %q", abbreviate(detail), r.Role)
	}
	r.LagMS, err = strconv.ParseInt(fields[3].value, 10, 64)
	if err != nil || r.LagMS < -1 {
		return Route{}, fmt.Errorf("pgowlclient: routing NOTICE DETAIL %q: lag_ms=%q is not a lag", abbreviate(detail), fields[3].value)
	}
	for _, f := range fields[len(routeDetailStart):] {
		switch f.key {
		case "fallback":
			r.Fallback = f.value
		case "subject":
			r.Subject = f.value
		default:
			if r.Extra == nil {
				r.Extra = map[string]string{}
			}
			r.Extra[f.key] = f.value
		}
	}
	return r, nil
}

// noticePrefix starts the message of every NOTICE and error pgowl sends itself.
const noticePrefix = "pgowl: "

// RouteFromNotice returns the route a NOTICE reports, and false for a NOTICE
// that is not a pgowl routing NOTICE (one a node sent, such as a RAISE NOTICE,
// or another pgowl NOTICE without a routing DETAIL).
func RouteFromNotice(n *pgconn.Notice) (Route, bool) {
	if n == nil || n.Code != "00000" || !strings.HasPrefix(n.Message, noticePrefix) {
		return Route{}, false
	}
	r, err := ParseRouteDetail(n.Detail)
	if err != nil {
		return Route{}, false
	}
	r.Message = n.Message
	return r, true
}
