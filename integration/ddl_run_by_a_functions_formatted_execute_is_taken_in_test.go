package integration

import (
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// formattedDDLSettings: read_your_writes off with the change polls at their default (1s) and off,
// so that a use misclassified as a read goes to a standby; and read_your_writes at its default,
// where it must be classified as a write, not merely kept on the primary by read-your-writes. The
// periodic whole read is far away in all.
var formattedDDLSettings = []struct {
	name   string
	poll   time.Duration
	rywOff bool
}{{"ryw_off_poll_1s", time.Second, true}, {"ryw_off_poll_0", 0, true}, {"ryw_default_poll_1s", time.Second, false}}

// formattedDDLOwl starts pgowl for one of formattedDDLSettings with the own-change setup.
func formattedDDLOwl(t *testing.T, poll time.Duration, rywOff bool) *owl {
	_, o := setupAndStart(t, "own changes", oaSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		cfg.Classify.ChangePollInterval = poll
		if rywOff {
			cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
		}
	})
	return o
}

// TestDDLRunByAFunctionsFormattedExecuteIsTakenIn: a VOLATILE PL/pgSQL function that runs DDL by
// EXECUTE format('CREATE OR REPLACE FUNCTION %s() ...', name), a migration helper, replaces the
// session's reader f by a writer. A computed EXECUTE was a catalogue change only in a procedure,
// so the call told the catalogue nothing: the session's next SELECT f() was planned with the old
// reader body and failed on a standby with 25006 (until a poll or the whole read found the
// change). The template now says the string is DDL: the call changes the catalogue, of names not
// known. Found by review.
func TestDDLRunByAFunctionsFormattedExecuteIsTakenIn(t *testing.T) {
	for _, k := range formattedDDLSettings {
		t.Run(k.name, func(t *testing.T) {
			o := formattedDDLOwl(t, k.poll, k.rywOff)
			replaceByAHelperCall(t, o, "oa_app.fmt_ddl_"+k.name, "BEGIN "+
				"EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql VOLATILE AS $b$SELECT nextval(''oa_app.oa_seq'')$b$', name); END")
		})
	}
}

// TestDDLAFunctionBuildsInAVariableIsTakenIn: the same helper built as migration helpers often
// are, the DDL formatted into a variable first (s := format(...); EXECUTE s). Found by review of
// the change above.
func TestDDLAFunctionBuildsInAVariableIsTakenIn(t *testing.T) {
	replaceByAHelperCall(t, formattedDDLOwl(t, 0, true), "oa_app.var_ddl", "DECLARE s text; BEGIN "+
		"s := format('CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql VOLATILE AS %L', name, 'SELECT nextval(''oa_app.oa_seq'')'); EXECUTE s; END")
}

// replaceByAHelperCall makes f a reader and f_install(name) a VOLATILE PL/pgSQL function of body
// that replaces the function name by a writer; it checks that f reads, calls f_install('f'), and
// checks that the session's uses of f right after and once the standbys replayed the call are
// classified as writes.
func replaceByAHelperCall(t *testing.T, o *owl, f, body string) {
	t.Helper()
	conn := oaConnect(t, o, oaModes[0].mode)
	oaMust(t, conn, oaSQLReader(f, 0))
	oaMust(t, conn, "CREATE OR REPLACE FUNCTION "+f+"_install(name text) RETURNS void LANGUAGE plpgsql VOLATILE AS $i$"+body+"$i$")
	catchUp(t, o.nodes)
	oaReaderUse(t, conn, "start", "SELECT "+f+"()", nil)
	oaMust(t, conn, "SELECT "+f+"_install('"+f+"')")
	oaWriterUse(t, conn, "right after the call that replaced f by a writer", "SELECT "+f+"()", nil)
	catchUp(t, o.nodes)
	oaWriterUse(t, conn, "once the standbys replayed it", "SELECT "+f+"()", nil)
}

// TestDDLRunByAFunctionsOpaqueExecuteIsAKnownGap: the same, with the DDL passed in whole
// (EXECUTE ddl): no template says what the string is, and a call of every function that runs
// dynamic SQL is not taken for a catalogue change (each would read the catalogue whole). With the
// change polls off, the session's next use is planned with the old definition until the whole
// read (docs/routing.md); with them on, the poll finds it within an interval.
func TestDDLRunByAFunctionsOpaqueExecuteIsAKnownGap(t *testing.T) {
	o := formattedDDLOwl(t, 0, true)
	conn := oaConnect(t, o, oaModes[0].mode)
	f := "oa_app.opaque_ddl"
	oaMust(t, conn, oaSQLReader(f, 0))
	oaMust(t, conn, "CREATE OR REPLACE FUNCTION "+f+"_run(ddl text) RETURNS void LANGUAGE plpgsql VOLATILE AS $i$BEGIN EXECUTE ddl; END$i$")
	catchUp(t, o.nodes)
	oaReaderUse(t, conn, "start", "SELECT "+f+"()", nil)
	oaMust(t, conn, "SELECT "+f+"_run('CREATE OR REPLACE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql VOLATILE AS $b$SELECT nextval(''oa_app.oa_seq'')$b$')")
	catchUp(t, o.nodes)
	rddWriterGap(t, "DDL a function runs from a string passed in whole is found by the change polls or the whole read, not at the call",
		conn, "once the standbys replayed the call that replaced f by a writer", "SELECT "+f+"()")
}
