package main

import (
	"os"
	"strings"
)

// The markers around the section of the report file that integration/migrationbench writes: a new
// report keeps that section, at its end.
const (
	migrationSectionStart = "<!-- migrationbench -->"
	migrationSectionEnd   = "<!-- /migrationbench -->"
)

// The markers around the section on guards' cost (written by hand from -targets
// pgowl,pgowl+guard,pgowl+guard+cache runs): a new report keeps it too.
const (
	guardSectionStart = "<!-- guardbench -->"
	guardSectionEnd   = "<!-- /guardbench -->"
)

// keepSections returns report with the migration and guard sections of the file at path
// appended, if it has them.
func keepSections(path, report string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return report
	}
	for _, m := range [][2]string{{migrationSectionStart, migrationSectionEnd}, {guardSectionStart, guardSectionEnd}} {
		start := strings.Index(string(old), m[0])
		end := strings.Index(string(old), m[1])
		if start < 0 || end < start {
			continue
		}
		report = strings.TrimRight(report, "\n") + "\n\n" + string(old[start:end+len(m[1])]) + "\n"
	}
	return report
}
