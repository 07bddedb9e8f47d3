package classify

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FactsCase is one entry of testdata/facts/facts_cases.json: a statement and the typed facts
// the classifier must give it, which a proxy acts on instead of reading the SQL again.
type FactsCase struct {
	Comment           string                `json:"comment"`
	SQL               string                `json:"sql"`
	Transaction       *TransactionStatement `json:"transaction,omitempty"`
	Settings          []SettingChange       `json:"settings,omitempty"`
	Deallocates       string                `json:"deallocates,omitempty"`
	Loads             string                `json:"loads,omitempty"`
	DiscardsSequences bool                  `json:"discards_sequences,omitempty"`
}

const factsTable = "testdata/facts/facts_cases.json"

func loadFactsCases(t *testing.T) []FactsCase {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(factsTable))
	if err != nil {
		t.Fatal(err)
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	var cases []FactsCase
	if err := decoder.Decode(&cases); err != nil {
		t.Fatalf("%s: %v", factsTable, err)
	}
	if len(cases) < 40 {
		t.Fatalf("%s has only %d cases", factsTable, len(cases))
	}
	return cases
}

// TestFactsGolden checks the typed facts of every case of the facts table, through a fresh
// classifier, through its cache, and through the fast path where it answers (the two paths must
// agree). On a mismatch it writes testdata/facts/facts_cases.actual.json.
func TestFactsGolden(t *testing.T) {
	cases := loadFactsCases(t)
	classifier := New(Options{})
	failed := false
	actuals := make([]FactsCase, 0, len(cases))
	for _, tc := range cases {
		effects := classifier.Classify(tc.SQL)
		actual := FactsCase{Comment: tc.Comment, SQL: tc.SQL, Transaction: effects.Transaction, Settings: effects.Settings,
			Deallocates: effects.Deallocates, Loads: effects.Loads, DiscardsSequences: effects.DiscardsSequences}
		actuals = append(actuals, actual)
		if !reflect.DeepEqual(actual, tc) {
			failed = true
			got, _ := json.Marshal(actual)
			want, _ := json.Marshal(tc)
			t.Errorf("%s\n  sql: %s\n  got:  %s\n  want: %s", tc.Comment, tc.SQL, got, want)
		}
		if cached := classifier.Classify(tc.SQL); !reflect.DeepEqual(cached, effects) {
			t.Errorf("%q: the cached answer differs", tc.SQL)
		}
		if fast, ok := New(Options{}).classifyFast(tc.SQL); ok {
			full := New(Options{CacheSize: -1}).classifyFull(tc.SQL)
			if !reflect.DeepEqual(fast.Transaction, full.Transaction) || !reflect.DeepEqual(fast.Settings, full.Settings) {
				t.Errorf("%q: the fast path's facts %+v %+v differ from the full path's %+v %+v", tc.SQL,
					fast.Transaction, fast.Settings, full.Transaction, full.Settings)
			}
		}
	}
	actualPath := strings.TrimSuffix(factsTable, ".json") + ".actual.json"
	if failed {
		data, err := json.MarshalIndent(actuals, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.FromSlash(actualPath), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", actualPath)
	} else if err := os.Remove(filepath.FromSlash(actualPath)); err != nil && !os.IsNotExist(err) {
		t.Error(err)
	}
}

// TestMergeKeepsFacts: the facts of several statements follow Merge's rules.
func TestMergeKeepsFacts(t *testing.T) {
	classifier := New(Options{})
	merged := Merge([]Effects{classifier.Classify("SELECT 1"), classifier.Classify("SET work_mem = '8MB'"),
		classifier.Classify("ROLLBACK TO SAVEPOINT s"), classifier.Classify("COMMIT"), classifier.Classify("DISCARD SEQUENCES"),
		classifier.Classify("RESET app.tenant")})
	if merged.Transaction == nil || merged.Transaction.Kind != TxKindRollbackToSavepoint {
		t.Errorf("Transaction %+v, want the first transaction statement's (ROLLBACK TO SAVEPOINT)", merged.Transaction)
	}
	want := []SettingChange{{Name: "work_mem", Replay: ReplayStatement}, {Name: "app.tenant", Reset: true, Replay: ReplayStatement}}
	if !reflect.DeepEqual(merged.Settings, want) {
		t.Errorf("Settings %+v, want %+v", merged.Settings, want)
	}
	if !merged.DiscardsSequences {
		t.Error("DiscardsSequences lost in the merge")
	}
	if one := Merge([]Effects{classifier.Classify("DEALLOCATE ps"), classifier.Classify("SELECT 1")}); one.Deallocates != "" {
		t.Errorf("Deallocates %q kept for two statements", one.Deallocates)
	}
}
