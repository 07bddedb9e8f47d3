package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// dockerInstruction is one instruction of a Dockerfile, its continuation lines joined.
type dockerInstruction struct {
	keyword string // upper case: FROM, RUN, COPY, ...
	args    string
}

// readDockerfile returns the instructions of the Dockerfile at path, comments left out.
func readDockerfile(t *testing.T, path string) []dockerInstruction {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstruction
	var pending strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && pending.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			pending.WriteString(strings.TrimSuffix(trimmed, `\`))
			pending.WriteByte(' ')
			continue
		}
		pending.WriteString(trimmed)
		keyword, args, _ := strings.Cut(strings.TrimSpace(pending.String()), " ")
		out = append(out, dockerInstruction{keyword: strings.ToUpper(keyword), args: strings.TrimSpace(args)})
		pending.Reset()
	}
	return out
}

// execForm decodes an instruction's JSON (exec) form, ["pgowl", "serve"].
func execForm(t *testing.T, in dockerInstruction) []string {
	t.Helper()
	var words []string
	if err := json.Unmarshal([]byte(in.args), &words); err != nil {
		t.Fatalf("%s %s: not the exec form: %v", in.keyword, in.args, err)
	}
	return words
}

// TestDockerfileMatchesTheBinary reads the Dockerfile as docker build would and checks it
// against this build of pgowl, since no Docker engine runs where the tests run: the build stage
// and the runtime stage are the same Debian release (the binary links the build stage's glibc)
// and the build stage's Go is the one go.mod asks; the version the build stamps lands in a
// variable that exists; the configuration the build writes, run through the same shell
// commands, is one pgowl accepts, listening on all interfaces on the ports the image exposes;
// the command runs pgowl serve with that file; the health check asks /readyz on the admin port
// with a program the image installs; and pgowl runs as a user of its own, not root.
func TestDockerfileMatchesTheBinary(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	instructions := readDockerfile(t, filepath.Join(root, "Dockerfile"))
	byKeyword := map[string][]dockerInstruction{}
	for _, in := range instructions {
		byKeyword[in.keyword] = append(byKeyword[in.keyword], in)
	}
	one := func(keyword string) dockerInstruction {
		t.Helper()
		if len(byKeyword[keyword]) != 1 {
			t.Fatalf("the Dockerfile has %d %s instructions, want 1", len(byKeyword[keyword]), keyword)
		}
		return byKeyword[keyword][0]
	}

	// The two stages.
	froms := byKeyword["FROM"]
	if len(froms) != 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a runtime stage", len(froms))
	}
	build := regexp.MustCompile(`^golang:(\d+\.\d+)(?:\.\d+)?-(\w+) AS build$`).FindStringSubmatch(froms[0].args)
	runtime := regexp.MustCompile(`^debian:(\w+)-slim$`).FindStringSubmatch(froms[1].args)
	if build == nil || runtime == nil {
		t.Fatalf("stages %q and %q: want golang:<go>-<debian> AS build, then debian:<debian>-slim", froms[0].args, froms[1].args)
	}
	if build[2] != runtime[1] {
		t.Errorf("the binary is built on Debian %s and runs on Debian %s: cgo links the build stage's glibc, so they must be the same release", build[2], runtime[1])
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?\s*$`).FindStringSubmatch(string(goMod))
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	if build[1] != goLine[1] {
		t.Errorf("the build stage has Go %s, go.mod asks for go %s%s", build[1], goLine[1], goLine[2])
	}

	// The build, and the configuration it writes.
	var buildRun dockerInstruction
	for _, in := range byKeyword["RUN"] {
		if strings.Contains(in.args, "go build") {
			buildRun = in
		}
	}
	for _, want := range []string{"CGO_ENABLED=1", "-X main.version=", "-o /out/pgowl ./cmd/pgowl"} {
		if !strings.Contains(buildRun.args, want) {
			t.Errorf("the build (%q) lacks %q", buildRun.args, want)
		}
	}
	_ = version // -X main.version sets this variable; the link ignores a name that does not exist
	var writeConfig []string
	for _, command := range strings.Split(buildRun.args, "&&") {
		if command = strings.TrimSpace(command); strings.Contains(command, "/out/pgowl.yaml") {
			writeConfig = append(writeConfig, command)
		}
	}
	if len(writeConfig) == 0 {
		t.Fatal("the build writes no /out/pgowl.yaml")
	}
	out := t.TempDir()
	script := strings.NewReplacer("/out/", out+"/", "config/example.yaml", filepath.Join(root, "config", "example.yaml")).Replace(strings.Join(writeConfig, " && "))
	if output, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("the build's commands that write the configuration (%s): %v\n%s", script, err, output)
	}
	document, err := os.ReadFile(filepath.Join(out, "pgowl.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	// The files in the image and the command that runs them.
	copies := map[string]string{}
	for _, in := range byKeyword["COPY"] {
		fields := strings.Fields(in.args)
		if len(fields) == 3 && fields[0] == "--from=build" {
			copies[fields[1]] = fields[2]
		}
	}
	entrypoint := execForm(t, one("ENTRYPOINT"))
	if binary := copies["/out/pgowl"]; len(entrypoint) != 1 || binary != filepath.Join("/usr/local/bin", entrypoint[0]) {
		t.Errorf("ENTRYPOINT %v runs a program the image does not have on its PATH (the binary is copied to %q)", entrypoint, binary)
	}
	args := execForm(t, one("CMD"))
	configFile := serveConfigFlag(t, args)
	if copies["/out/pgowl.yaml"] != configFile {
		t.Errorf("the command reads --config %s, the configuration is copied to %s", configFile, copies["/out/pgowl.yaml"])
	}
	cfg := loadDeployConfig(t, "the Dockerfile's configuration", string(document), args, nil)

	// The ports.
	exposed := map[int]bool{}
	for _, p := range strings.Fields(one("EXPOSE").args) {
		port, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
		if err != nil {
			t.Fatalf("EXPOSE %q: %v", p, err)
		}
		exposed[port] = true
	}
	adminPort := ""
	for _, l := range []struct{ key, address string }{{"listen", cfg.Listen}, {"admin.listen", cfg.Admin.Listen}} {
		_, portText, _ := strings.Cut(l.address, ":")
		port, _ := strconv.Atoi(portText)
		if !exposed[port] {
			t.Errorf("%s %q listens on a port the image does not expose (%s)", l.key, l.address, one("EXPOSE").args)
			continue
		}
		checkListensInContainer(t, l.key, l.address, port)
		if l.key == "admin.listen" {
			adminPort = portText
		}
	}

	// The health check, and the program it runs.
	check := one("HEALTHCHECK").args
	if !strings.Contains(check, "http://127.0.0.1:"+adminPort+"/readyz") || !adminPaths(t, cfg)["/readyz"] {
		t.Errorf("the health check %q does not ask /readyz on the admin port %s", check, adminPort)
	}
	_, command, _ := strings.Cut(check, " CMD ")
	program := strings.Fields(command)
	installed := false
	for _, in := range byKeyword["RUN"] {
		if strings.Contains(in.args, "apt-get install") && len(program) > 0 && regexp.MustCompile(`\b`+regexp.QuoteMeta(program[0])+`\b`).MatchString(in.args) {
			installed = true
		}
	}
	if !installed {
		t.Errorf("the health check runs %q, which the runtime stage does not install (debian:*-slim has no curl or wget)", command)
	}

	// The user.
	user := one("USER").args
	if user == "root" || user == "0" || strings.HasPrefix(user, "0:") {
		t.Errorf("pgowl runs as %s; it needs no privileges", user)
	}
	created := false
	for _, in := range byKeyword["RUN"] {
		if regexp.MustCompile(`useradd [^&]*\b` + regexp.QuoteMeta(user) + `\b`).MatchString(in.args) {
			created = true
		}
	}
	if !created {
		t.Errorf("USER %s is not created in the runtime stage", user)
	}
}
