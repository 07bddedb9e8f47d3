package owltest

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// RouteNoticePrefix starts the message of every NOTICE pgowl sends itself,
// which is what tells its routing NOTICEs apart from the nodes' own.
const RouteNoticePrefix = "pgowl: "

// RouteDetailPattern is the documented start of a routing NOTICE's DETAIL;
// its groups are the node, the role, the reason code and lag_ms.
var RouteDetailPattern = regexp.MustCompile(`^node=([A-Za-z0-9_-]+) role=(primary|standby) reason=([A-Z_]+) lag_ms=(-?[0-9]+)(?: |$)`)

// Route is what a routing NOTICE's DETAIL says about where a unit ran.
type Route struct {
	Node   string
	Role   string
	Reason string
	LagMS  int64
}

// IsRouteNotice reports whether a NOTICE with this message comes from pgowl
// rather than from a node.
func IsRouteNotice(message string) bool {
	return strings.HasPrefix(message, RouteNoticePrefix)
}

// ParseRoute parses a pgowl NOTICE's DETAIL and checks that its message names
// the same node and role. A DETAIL of another shape fails t and returns
// false. Severity, SQLSTATE and lag are left to the caller, whose clients
// report them differently.
func ParseRoute(t testing.TB, message, detail string) (Route, bool) {
	t.Helper()
	m := RouteDetailPattern.FindStringSubmatch(detail)
	if m == nil {
		t.Errorf("pgowl NOTICE %q has DETAIL %q, which does not start with node=<name> role=<primary|standby> reason=<CODE> lag_ms=<n>", message, detail)
		return Route{}, false
	}
	lag, _ := strconv.ParseInt(m[4], 10, 64)
	r := Route{Node: m[1], Role: m[2], Reason: m[3], LagMS: lag}
	if want := RouteNoticePrefix + r.Node + " (" + r.Role + ")"; !strings.HasPrefix(message, want) {
		t.Errorf("pgowl NOTICE message %q does not start with %q (from its DETAIL)", message, want)
	}
	return r, true
}

// OrAny shows an optional expectation in a failure message: s, or <any>
// when it is empty.
func OrAny(s string) string {
	if s == "" {
		return "<any>"
	}
	return s
}
