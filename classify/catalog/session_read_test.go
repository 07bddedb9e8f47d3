package catalog

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/wire"
)

// heldManager returns a Manager holding an empty catalogue of database "db", without a connection:
// a read it starts fails, which leaves the change pending.
func heldManager(t *testing.T) *Manager {
	t.Helper()
	m := New(Options{Logger: zerolog.Nop()})
	m.state("db").cat.Store(classify.NewCatalogue(classify.CatalogueData{Database: "db"}))
	return m
}

// readDone feeds r the replies of a read that found nothing: the settings' row and an empty
// result per statement, then ReadyForQuery.
func readDone(t *testing.T, r *SessionRead) {
	t.Helper()
	for range r.statements {
		r.Receive(wire.MsgCommandComplete, []byte("SELECT 0\x00"))
	}
	if !r.Receive(wire.MsgReadyForQuery, []byte{wire.TxIdle}) {
		t.Fatal("the read is not done at its ReadyForQuery")
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestSessionReadMakesTheCatalogueCurrentOnlyWhenNothingElseChanged(t *testing.T) {
	own := &classify.CatalogueChanges{Functions: []string{"f"}}
	for _, c := range []struct {
		name string
		// between runs after the read was prepared and before it is told.
		between func(m *Manager)
		applied bool
	}{
		{name: "the session's own change only", between: func(*Manager) {}, applied: true},
		{name: "another session changes the same name meanwhile (it may commit after the read's snapshot)",
			between: func(m *Manager) { m.Changed("db", &classify.CatalogueChanges{Functions: []string{"f"}}, false) }},
		{name: "another session changes another name meanwhile",
			between: func(m *Manager) { m.Changed("db", &classify.CatalogueChanges{Functions: []string{"g"}}, false) }},
		{name: "a lookup of another name meanwhile",
			between: func(m *Manager) { m.state("db").generation++ }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := heldManager(t)
			// The session classified its change: the catalogue is told it is about to change.
			m.Changed("db", own, false)
			read := m.PrepareSessionRead("db", own)
			if read == nil {
				t.Fatal("no session read for a change of one function")
			}
			c.between(m)
			readDone(t, read)
			if applied := m.ChangedAndRead("db", own, read); applied != c.applied {
				t.Fatalf("applied = %v, want %v", applied, c.applied)
			}
			if !c.applied {
				if _, current := m.Held("db"); current {
					t.Fatal("held catalogue current, although it may miss a committed change")
				}
				return
			}
			// The patch runs beside the caller: a statement that needs the catalogue waits for it
			// (the Manager has no connection, so only the session's read can make it current).
			if cat := m.Catalogue("db"); cat == nil {
				t.Fatal("no catalogue after the session's read was applied")
			}
			if _, current := m.Held("db"); !current {
				t.Fatal("held catalogue not current after the session's read was applied")
			}
		})
	}
}

func TestSessionReadIsNotUsedWhenItCannotCoverThePendingChanges(t *testing.T) {
	m := heldManager(t)
	// Another session's change is pending (told, not read yet).
	m.Changed("db", &classify.CatalogueChanges{Relations: []string{"v"}}, false)
	own := &classify.CatalogueChanges{Functions: []string{"f"}}
	m.Changed("db", own, false)
	read := m.PrepareSessionRead("db", own)
	readDone(t, read)
	if m.ChangedAndRead("db", own, read) {
		t.Fatal("a read of f made the catalogue current while a change of v was pending")
	}
	if _, current := m.Held("db"); current {
		t.Fatal("the catalogue is current although the change of v was not read")
	}
}

func TestSessionReadThatFailedIsNotUsed(t *testing.T) {
	m := heldManager(t)
	own := &classify.CatalogueChanges{Functions: []string{"f"}}
	m.Changed("db", own, false)
	read := m.PrepareSessionRead("db", own)
	read.Receive(wire.MsgErrorResponse, []byte("SERROR\x00C57014\x00Mcanceling statement due to statement timeout\x00\x00"))
	read.Receive(wire.MsgReadyForQuery, []byte{wire.TxIdle})
	if read.Err() == nil {
		t.Fatal("a read that met an error reports none")
	}
	if m.ChangedAndRead("db", own, read) {
		t.Fatal("a failed read made the catalogue current")
	}
	if _, current := m.Held("db"); current {
		t.Fatal("the catalogue is current after a failed read")
	}
}

func TestSessionReadIsOnlyPreparedForNamedChanges(t *testing.T) {
	m := heldManager(t)
	for _, c := range []*classify.CatalogueChanges{
		nil,
		{Everything: true},
		{},
	} {
		if m.PrepareSessionRead("db", c) != nil {
			t.Errorf("a session read was prepared for %+v", c)
		}
	}
	if New(Options{}).PrepareSessionRead("db", &classify.CatalogueChanges{Functions: []string{"f"}}) != nil {
		t.Error("a session read was prepared without a held catalogue")
	}
	withOverrides := New(Options{Overrides: Overrides{Readonly: []string{"f(int)"}}})
	withOverrides.state("db").cat.Store(classify.NewCatalogue(classify.CatalogueData{Database: "db"}))
	if withOverrides.PrepareSessionRead("db", &classify.CatalogueChanges{Functions: []string{"f"}}) != nil {
		t.Error("a session read was prepared although configured assertions must be resolved again")
	}
}

func TestSessionReadQuotesNamesAsArrayElements(t *testing.T) {
	got := string(textArrayValue([]string{"f", `a"b`, `c\d`, "é"}))
	want := `{"f","a\"b","c\\d","é"}`
	if got != want {
		t.Fatalf("textArrayValue = %s, want %s", got, want)
	}
}
