package classify

import (
	"strconv"
	"strings"
	"testing"
)

// A STABLE function whose body the analysis budget did not reach was not seen at all: its visible
// advisory lock (which a hot standby takes silently) must keep the call on the primary, as it does
// for the same function declared VOLATILE. The declaration covers what the body cannot show, not a
// body that was never read.
func TestAStableFunctionTheBudgetDidNotReachIsNotTakenAsRead(t *testing.T) {
	data := *testCatalogue().Data()
	calls := make([]string, 0, analysisBudget+1)
	for i := 0; i < analysisBudget; i++ {
		name := "fill" + strconv.Itoa(i)
		data.Functions = append(data.Functions, Function{OID: uint32(50000 + i), Schema: "public", Name: name, Language: "sql",
			Volatility: 'v', Kind: 'f', Result: "integer", Source: "SELECT 1"})
		calls = append(calls, name+"()")
	}
	for _, vol := range []byte{'v', 's'} {
		name := "locker_" + string(vol)
		data.Functions = append(data.Functions, Function{OID: uint32(49000 + int(vol)), Schema: "public", Name: name, Language: "sql",
			Volatility: vol, Kind: 'f', Result: "boolean", Source: "SELECT pg_try_advisory_lock(1)"})
	}
	ctx := &Context{Database: "test", User: "app", SearchPath: []string{"public"}}
	for _, name := range []string{"locker_v", "locker_s"} {
		cat := NewCatalogue(data) // a fresh memo: the budget is spent on the fillers first
		sql := "SELECT " + strings.Join(calls, ", ") + ", " + name + "()"
		got := New(Options{CacheSize: -1}).ClassifyWith(sql, ctx, cat)
		if got.Access != Write {
			t.Errorf("%s() after %d other bodies: %v %v %q, assumptions %q; want the primary", name, analysisBudget,
				got.Access, got.Reason, got.Subject, got.Assumptions)
		}
	}
}
