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

// keepSections returns report with the migration section of the file at path appended, if it has one.
func keepSections(path, report string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return report
	}
	start := strings.Index(string(old), migrationSectionStart)
	end := strings.Index(string(old), migrationSectionEnd)
	if start < 0 || end < start {
		return report
	}
	return strings.TrimRight(report, "\n") + "\n\n" + string(old[start:end+len(migrationSectionEnd)]) + "\n"
}
