package main

import (
	"os"
	"strings"
)

// The markers around sections of the report file that other runs write: a
// new report keeps them, at its end. integration/migrationbench writes the
// migration section; the read-your-writes section holds a run with the
// pgowl-ryw-off target (readyourwrites.go), kept until a run has that target.
const (
	migrationSectionStart      = "<!-- migrationbench -->"
	migrationSectionEnd        = "<!-- /migrationbench -->"
	readYourWritesSectionStart = "<!-- readyourwrites -->"
	readYourWritesSectionEnd   = "<!-- /readyourwrites -->"
)

// The markers around the section on guards' cost (written by hand from -targets
// pgowl,pgowl+guard,pgowl+guard+cache runs): a new report keeps it too.
const (
	guardSectionStart = "<!-- guardbench -->"
	guardSectionEnd   = "<!-- /guardbench -->"
)

// keepSections returns report with the kept sections of the file at path (read your writes,
// migration, guards) appended, those the report does not have itself.
func keepSections(path, report string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return report
	}
	for _, m := range [][2]string{{readYourWritesSectionStart, readYourWritesSectionEnd}, {migrationSectionStart, migrationSectionEnd}, {guardSectionStart, guardSectionEnd}} {
		start := strings.Index(string(old), m[0])
		end := strings.Index(string(old), m[1])
		if start < 0 || end < start || strings.Contains(report, m[0]) {
			continue
		}
		report = strings.TrimRight(report, "\n") + "\n\n" + string(old[start:end+len(m[1])]) + "\n"
	}
	return report
}
