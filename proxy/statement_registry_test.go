package proxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// parsed builds the statement of a client's Parse of query under name, as
// the session does, in the scope of a session whose search_path is public.
func parsed(t *testing.T, names *managedNames, name, query string) *preparedStmt {
	t.Helper()
	body := append(append(append([]byte(name), 0), query...), 0, 0, 0)
	pm, err := decodeParse(body)
	if err != nil {
		t.Fatal(err)
	}
	return names.newStatement(pm, body, statementScope{searchPath: []string{"public"}})
}

// TestRegistryFindsWhatTheClientParsed: a Bind or Describe finds a named
// statement by the client's name and the unnamed one by "", and nothing
// for a name the client never parsed.
func TestRegistryFindsWhatTheClientParsed(t *testing.T) {
	var names managedNames
	var r statementRegistry
	ps := parsed(t, &names, "ps", "SELECT 1")
	unnamed := parsed(t, &names, "", "SELECT 2")
	if replaced := r.parse(ps); replaced != nil {
		t.Fatalf("the first Parse of ps replaced %v", replaced)
	}
	if replaced := r.parse(unnamed); replaced != nil {
		t.Fatalf("the first unnamed Parse replaced %v", replaced)
	}
	if got := r.lookup("ps"); got != ps {
		t.Errorf("lookup(ps) = %v, want the statement parsed as ps", got)
	}
	if got := r.lookup(""); got != unnamed {
		t.Errorf("lookup(\"\") = %v, want the unnamed statement", got)
	}
	if got := r.lookup("other"); got != nil {
		t.Errorf("lookup(other) = %v, want nil: the client never parsed it", got)
	}
	if r.count() != 1 || r.size() != len(ps.frame) {
		t.Errorf("count %d, size %d; want 1 named statement of %d bytes (the unnamed one does not count)", r.count(), r.size(), len(ps.frame))
	}
}

// TestRegistryRefusesASecondParseOfANameInUse: PostgreSQL refuses a Parse
// of a name the client holds with 42P05 and keeps the statement; the
// unnamed statement is never a duplicate, its Parse replaces it.
func TestRegistryRefusesASecondParseOfANameInUse(t *testing.T) {
	var names managedNames
	var r statementRegistry
	first := parsed(t, &names, "ps", "SELECT 1")
	r.parse(first)
	if held := r.duplicate("ps"); held != first {
		t.Fatalf("duplicate(ps) = %v, want the statement the client holds (42P05)", held)
	}
	if held := r.duplicate("other"); held != nil {
		t.Errorf("duplicate(other) = %v, want nil: a new name is parsed", held)
	}
	r.parse(parsed(t, &names, "", "SELECT 1"))
	if held := r.duplicate(""); held != nil {
		t.Errorf("duplicate(\"\") = %v, want nil: an unnamed Parse replaces the unnamed statement", held)
	}
	if r.lookup("ps") != first {
		t.Error("the refused Parse changed the statement the client holds")
	}
}

// TestRegistryDeallocatedNameCanBeParsedAgain: after a Close of a statement,
// or a DEALLOCATE of it sent as SQL (both close it in the registry), the
// name is free: a new Parse of it is not a duplicate, and a Bind finds the
// new statement, not the old one.
func TestRegistryDeallocatedNameCanBeParsedAgain(t *testing.T) {
	for _, how := range []string{"Close", "DEALLOCATE"} {
		t.Run(how, func(t *testing.T) {
			var names managedNames
			var r statementRegistry
			old := parsed(t, &names, "ps", "SELECT 'first'")
			r.parse(old)
			if how == "DEALLOCATE" {
				// Sent as SQL: the session answers it and closes the client's name.
				var out bytes.Buffer
				sess := relaySession(&out)
				sess.statements = r
				eff := classify.New(classify.Options{}).Classify("DEALLOCATE ps")
				name, ok := deallocatedName(eff)
				if !ok || name != "ps" {
					t.Fatalf("DEALLOCATE ps deallocates %q, %v", name, ok)
				}
				sess.deallocateClientStatement(name)
				sess.client.w.Flush()
				if !bytes.Contains(out.Bytes(), []byte("DEALLOCATE\x00")) {
					t.Fatalf("the client got %q, want CommandComplete DEALLOCATE", out.Bytes())
				}
				r = sess.statements
			} else if closed := r.close("ps"); closed != old {
				t.Fatalf("close(ps) = %v, want the statement closed", closed)
			}
			if r.lookup("ps") != nil || r.count() != 0 {
				t.Fatal("ps is still found after it was deallocated")
			}
			if held := r.duplicate("ps"); held != nil {
				t.Fatalf("a Parse of ps after its deallocation is refused as a duplicate of %q", held.sql)
			}
			again := parsed(t, &names, "ps", "SELECT 'second'")
			if replaced := r.parse(again); replaced != nil {
				t.Errorf("the new Parse replaced %v, want nothing", replaced)
			}
			if got := r.lookup("ps"); got != again {
				t.Errorf("a Bind of ps finds %v, want the new statement", got)
			}
			if closed := r.close("never"); closed != nil {
				t.Errorf("close of a name the client never parsed returned %v", closed)
			}
		})
	}
}

// TestRegistrySkippedCloseKeepsTheStatement: a Close the node skipped (an
// error earlier in the batch) closed nothing: the statement is back, unless
// the client parsed the name again meanwhile.
func TestRegistrySkippedCloseKeepsTheStatement(t *testing.T) {
	var names managedNames
	var r statementRegistry
	ps := parsed(t, &names, "ps", "SELECT 1")
	unnamed := parsed(t, &names, "", "SELECT 2")
	r.parse(ps)
	r.parse(unnamed)
	r.restore(r.close("ps"))
	r.restore(r.close(""))
	if r.lookup("ps") != ps || r.lookup("") != unnamed {
		t.Fatal("a skipped Close lost the statement")
	}
	closed := r.close("ps")
	newer := parsed(t, &names, "ps", "SELECT 3")
	r.parse(newer)
	r.restore(closed)
	if r.lookup("ps") != newer {
		t.Error("restoring a skipped Close replaced the statement parsed after it")
	}
	r.restore(nil) // a Close of a name the client did not have
}

// TestRegistryUnnamedParseReplacesTheUnnamedStatement: a second unnamed
// Parse replaces the first; taken back because the node skipped it, the
// first is the unnamed statement again; refused by the node, there is none
// (PostgreSQL drops the old one before it parses). A simple Query drops it.
func TestRegistryUnnamedParseReplacesTheUnnamedStatement(t *testing.T) {
	var names managedNames
	var r statementRegistry
	first := parsed(t, &names, "", "SELECT 1")
	second := parsed(t, &names, "", "SELECT 2")
	r.parse(first)
	replaced := r.parse(second)
	if replaced != first || r.lookup("") != second {
		t.Fatalf("the second unnamed Parse replaced %v and left %v", replaced, r.lookup(""))
	}
	r.undoParse(second, replaced, false)
	if r.lookup("") != first {
		t.Fatalf("a skipped unnamed Parse left %v, want the first statement back", r.lookup(""))
	}
	replaced = r.parse(second)
	r.undoParse(second, replaced, true)
	if got := r.lookup(""); got != nil {
		t.Fatalf("a refused unnamed Parse left %v, want no unnamed statement", got)
	}
	r.parse(first)
	r.undoParse(second, first, false) // second is no longer the unnamed statement: nothing to undo
	if r.lookup("") != first {
		t.Error("undoing an old Parse replaced the current unnamed statement")
	}
	r.forgetUnnamed()
	if r.lookup("") != nil {
		t.Error("the unnamed statement survived a simple Query")
	}
}

// TestRegistryUndoesANamedParse: a named Parse the node skipped or refused
// leaves the name as it was.
func TestRegistryUndoesANamedParse(t *testing.T) {
	for _, refused := range []bool{false, true} {
		var names managedNames
		var r statementRegistry
		ps := parsed(t, &names, "ps", "SELECT 1")
		r.undoParse(ps, r.parse(ps), refused)
		if r.lookup("ps") != nil {
			t.Errorf("refused=%v: the undone Parse of ps is still found", refused)
		}
	}
}

// TestRegistryForgetsEverythingAtDiscardAll: DISCARD ALL and DEALLOCATE ALL
// leave the client no statement.
func TestRegistryForgetsEverythingAtDiscardAll(t *testing.T) {
	var names managedNames
	var r statementRegistry
	r.parse(parsed(t, &names, "a", "SELECT 1"))
	r.parse(parsed(t, &names, "b", "SELECT 2"))
	r.parse(parsed(t, &names, "", "SELECT 3"))
	r.forgetAll()
	if r.lookup("a") != nil || r.lookup("b") != nil || r.lookup("") != nil || r.count() != 0 || r.size() != 0 {
		t.Fatal("a statement survived DISCARD ALL")
	}
	r.parse(parsed(t, &names, "a", "SELECT 1"))
	if r.count() != 1 {
		t.Fatal("a Parse after DISCARD ALL is not recorded")
	}
}

// TestManagedNamesGenerations: the same text in the same scope has the same
// managed name in every session, so that backends share it; another
// search_path or an unknown one gives another name. Once a node refused the
// statement (retire), a reused client name parsed again gets a new managed
// name, and the old statement keeps its own.
func TestManagedNamesGenerations(t *testing.T) {
	var names managedNames
	a := parsed(t, &names, "ps", "SELECT * FROM t")
	b := parsed(t, &names, "other_name", "SELECT * FROM t")
	if a.serverName != b.serverName || a.id == b.id {
		t.Fatalf("the same statement under two client names: managed names %q and %q, ids %d and %d; want one name, two ids",
			a.serverName, b.serverName, a.id, b.id)
	}
	if !strings.HasPrefix(a.serverName, "pgowl_") {
		t.Errorf("managed name %q lacks the pgowl_ prefix", a.serverName)
	}
	if got := string(a.frame[5 : 5+len(a.serverName)]); got != a.serverName {
		t.Errorf("the Parse frame names %q, want the managed name %q", got, a.serverName)
	}
	body := []byte("ps\x00SELECT * FROM t\x00\x00\x00")
	pm, _ := decodeParse(body)
	if other := names.newStatement(pm, body, statementScope{searchPath: []string{"app", "public"}}); other.serverName == a.serverName {
		t.Error("another search_path gives the same managed name: the text may name other tables there")
	}
	s1 := names.newStatement(pm, body, statementScope{searchPathUnknown: true, session: 1})
	s2 := names.newStatement(pm, body, statementScope{searchPathUnknown: true, session: 2})
	if s1.serverName == s2.serverName {
		t.Error("two sessions whose search_path is unknown share a managed name")
	}

	names.retire(a)
	again := parsed(t, &names, "ps", "SELECT * FROM t")
	if again.serverName == a.serverName || again.generationKey != a.generationKey {
		t.Fatalf("after retire: managed name %q (was %q), key %q (was %q); want a new name for the same statement",
			again.serverName, a.serverName, again.generationKey, a.generationKey)
	}
	names.retire(a) // a session still holding the old generation retires it too
	third := parsed(t, &names, "ps", "SELECT * FROM t")
	if third.serverName == again.serverName || third.serverName == a.serverName {
		t.Errorf("a second retire gave %q again", third.serverName)
	}
	names.retire(parsed(t, &names, "", "SELECT 1")) // an unnamed statement has no generations
}

// TestDuplicateParseIsSentForTheNodeToRefuse: a client's Parse of a name it
// holds goes to the node under the held statement's managed name, with the
// new text, so that the node refuses it with 42P05 after checking the text
// as PostgreSQL would; the relay is told the client's name. A backend that
// lacks the held statement gets it first (its reply swallowed). The client
// keeps its statement. After a Close, the same Parse is the client's new
// statement.
func TestDuplicateParseIsSentForTheNodeToRefuse(t *testing.T) {
	for _, backendHolds := range []bool{true, false} {
		var out, sent bytes.Buffer
		sess := relaySession(&out)
		names := &sess.srv.statementNames
		held := parsed(t, names, "ps", "SELECT 1")
		sess.statements.parse(held)
		be := scriptedBackend(nil, &sent)
		if backendHolds {
			be.statements().add(held.serverName)
		}
		dup := parsed(t, names, "ps", "SELECT 2")
		sess.writeClientParse(be, &batchMsg{typ: wire.MsgParse, name: "ps", stmt: dup})
		be.conn.Writer.Flush()

		var want []byte
		if !backendHolds {
			want = append(want, held.frame...)
			if e := be.expect.front(); !e.swallow || e.serverName != held.serverName {
				t.Fatalf("backend without the statement: first expectation %+v, want the held statement's swallowed Parse", *e)
			}
			be.expect.pop()
		}
		want = wire.AppendFrame(want, wire.MsgParse, []byte(held.serverName+"\x00SELECT 2\x00\x00\x00"))
		if !bytes.Equal(sent.Bytes(), want) {
			t.Fatalf("backend holds it %v: sent %q, want %q", backendHolds, sent.Bytes(), want)
		}
		if e := be.expect.front(); be.expect.len() != 1 || e.duplicateOf != "ps" || e.clientOwn {
			t.Fatalf("backend holds it %v: expectation %+v (of %d), want one Parse that is a duplicate of ps", backendHolds, *e, be.expect.len())
		}
		if sess.statements.lookup("ps") != held {
			t.Fatal("the refused Parse replaced the client's statement")
		}
	}

	var out, sent bytes.Buffer
	sess := relaySession(&out)
	held := parsed(t, &sess.srv.statementNames, "ps", "SELECT 1")
	sess.statements.parse(held)
	sess.statements.close("ps")
	be := scriptedBackend(nil, &sent)
	again := parsed(t, &sess.srv.statementNames, "ps", "SELECT 2")
	sess.writeClientParse(be, &batchMsg{typ: wire.MsgParse, name: "ps", stmt: again})
	if e := be.expect.front(); e.duplicateOf != "" || !e.clientOwn || e.stmt != again || e.serverName != again.serverName {
		t.Fatalf("a Parse of a closed name: expectation %+v, want the client's new statement", *e)
	}
	if sess.statements.lookup("ps") != again || !be.statements().holds(again.serverName) {
		t.Fatal("a Parse of a closed name is not the client's statement, or not recorded on the connection")
	}
}
