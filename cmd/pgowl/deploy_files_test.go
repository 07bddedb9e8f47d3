package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pgowl/pgowl/admin"
	"github.com/pgowl/pgowl/config"
)

// deployDir holds the compose file and the Kubernetes manifests.
const deployDir = "../../deploy"

// fixedShutdownGrace is how long pgowl lets sessions finish after SIGTERM while the
// configuration has no shutdown_timeout key.
const fixedShutdownGrace = 5 * time.Second

// The parts of the Kubernetes objects the test reads.
type (
	k8sObject struct {
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   k8sMetadata       `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		Spec       yaml.Node         `yaml:"spec"`
	}
	k8sMetadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	k8sSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	statefulSetSpec struct {
		Replicas    int         `yaml:"replicas"`
		ServiceName string      `yaml:"serviceName"`
		Selector    k8sSelector `yaml:"selector"`
		Template    struct {
			Metadata k8sMetadata `yaml:"metadata"`
			Spec     podSpec     `yaml:"spec"`
		} `yaml:"template"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
		Containers                    []container `yaml:"containers"`
		Volumes                       []struct {
			Name      string `yaml:"name"`
			ConfigMap struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
		} `yaml:"volumes"`
	}
	container struct {
		Name  string   `yaml:"name"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom struct {
				FieldRef struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		ReadinessProbe probe `yaml:"readinessProbe"`
		LivenessProbe  probe `yaml:"livenessProbe"`
		Lifecycle      struct {
			PreStop struct {
				Exec struct {
					Command []string `yaml:"command"`
				} `yaml:"exec"`
			} `yaml:"preStop"`
		} `yaml:"lifecycle"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	probe struct {
		HTTPGet struct {
			Path string    `yaml:"path"`
			Port yaml.Node `yaml:"port"`
		} `yaml:"httpGet"`
	}
	serviceSpec struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []struct {
			Name       string    `yaml:"name"`
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	}
	pdbSpec struct {
		MinAvailable   *int        `yaml:"minAvailable"`
		MaxUnavailable *int        `yaml:"maxUnavailable"`
		Selector       k8sSelector `yaml:"selector"`
	}
	composeFile struct {
		Services map[string]struct {
			Command         []string `yaml:"command"`
			Ports           []string `yaml:"ports"`
			Volumes         []string `yaml:"volumes"`
			StopGracePeriod string   `yaml:"stop_grace_period"`
			Healthcheck     struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
)

// TestKubernetesManifestsMatchTheBinary reads deploy/kubernetes and checks that what the
// manifests say about pgowl is true of this binary: the container's arguments are flags of
// serve, the ConfigMap is a valid configuration at the path --config names, the container ports
// are the ports pgowl listens on (on all interfaces), the probes ask paths the admin listener
// serves on its port, the Service and the PodDisruptionBudget select the pods, and the grace
// period covers the preStop wait and pgowl's own drain.
func TestKubernetesManifestsMatchTheBinary(t *testing.T) {
	objects := readManifests(t, filepath.Join(deployDir, "kubernetes"))
	want := []string{"ConfigMap/pgowl-config", "PodDisruptionBudget/pgowl", "Service/pgowl", "Service/pgowl-peering", "StatefulSet/pgowl"}
	var kinds []string
	for kind := range objects {
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, want) {
		t.Fatalf("deploy/kubernetes holds %v, want one each of %v", kinds, want)
	}

	var deployment statefulSetSpec
	decodeSpec(t, objects["StatefulSet/pgowl"], &deployment)
	pod := deployment.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("the pod has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !subsetOf(deployment.Selector.MatchLabels, deployment.Template.Metadata.Labels) || len(deployment.Selector.MatchLabels) == 0 {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", deployment.Selector.MatchLabels, deployment.Template.Metadata.Labels)
	}

	// The configuration: the ConfigMap mounted where --config points, loaded as serve loads it.
	configFile := serveConfigFlag(t, c.Args)
	cm := objects["ConfigMap/pgowl-config"]
	mountedAt := ""
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap.Name == cm.Metadata.Name {
				mountedAt = m.MountPath
			}
		}
	}
	key := strings.TrimPrefix(configFile, mountedAt+"/")
	if mountedAt == "" || key == configFile {
		t.Fatalf("--config %s is not in the mounted ConfigMap %s", configFile, cm.Metadata.Name)
	}
	document, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s, which --config %s reads", cm.Metadata.Name, key, configFile)
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	// Each replica loads the configuration with its own pod name: every one must get its own
	// peering.instance, from the peers entry that is its stable name under the headless Service.
	if deployment.Replicas < 2 {
		t.Errorf("replicas: %d, want at least 2 (the PodDisruptionBudget keeps one)", deployment.Replicas)
	}
	var cfg config.Config
	instances := map[int]string{}
	for ordinal := range deployment.Replicas {
		podName := fmt.Sprintf("%s-%d", objects["StatefulSet/pgowl"].Metadata.Name, ordinal)
		environ := podEnvironment(t, c, podName)
		cfg = loadDeployConfig(t, "ConfigMap "+cm.Metadata.Name+" in pod "+podName, document, c.Args, environ)
		instance := cfg.Peering.Instance
		if instance == 0 {
			t.Errorf("pod %s: peering.instance is 0 (peering off); environment %v", podName, environ)
			continue
		}
		if other, taken := instances[instance]; taken {
			t.Errorf("pods %s and %s both get peering.instance %d", other, podName, instance)
		}
		instances[instance] = podName
		wantSelf := net.JoinHostPort(podName+"."+deployment.ServiceName, strconv.Itoa(ports["peering"]))
		if cfg.Peering.Self != wantSelf {
			t.Errorf("pod %s: peering.self is %q, want its stable name under the headless Service, %q", podName, cfg.Peering.Self, wantSelf)
		}
		checkListensInContainer(t, "peering.listen", cfg.Peering.Listen, ports["peering"])
	}
	checkListensInContainer(t, "listen", cfg.Listen, ports["postgres"])
	checkListensInContainer(t, "admin.listen", cfg.Admin.Listen, ports["admin"])

	// The probes ask what the admin listener serves, on its port.
	served := adminPaths(t, cfg)
	for _, p := range []struct {
		what, want string
		probe      probe
	}{{"readinessProbe", "/readyz", c.ReadinessProbe}, {"livenessProbe", "/healthz", c.LivenessProbe}} {
		if p.probe.HTTPGet.Path != p.want {
			t.Errorf("%s asks %q, want %s", p.what, p.probe.HTTPGet.Path, p.want)
		}
		if !served[p.probe.HTTPGet.Path] {
			t.Errorf("%s asks %s, which the admin listener does not serve", p.what, p.probe.HTTPGet.Path)
		}
		if port := resolvePort(t, p.probe.HTTPGet.Port, ports); port != ports["admin"] || port == 0 {
			t.Errorf("%s asks port %d, want the admin port %d", p.what, port, ports["admin"])
		}
	}

	// Draining: preStop waits, then SIGTERM's graceful shutdown; the grace period covers both.
	preStop := c.Lifecycle.PreStop.Exec.Command
	if len(preStop) != 2 || preStop[0] != "sleep" {
		t.Fatalf("preStop runs %v, want [sleep <seconds>]", preStop)
	}
	wait, err := strconv.Atoi(preStop[1])
	if err != nil || wait < 5 {
		t.Errorf("preStop sleeps %q, want at least 5 seconds for the endpoints to drop the pod", preStop[1])
	}
	drain := shutdownDrain(t, document)
	if need := time.Duration(wait)*time.Second + drain; time.Duration(pod.TerminationGracePeriodSeconds)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %d does not cover preStop's %ds and pgowl's drain of %s", pod.TerminationGracePeriodSeconds, wait, drain)
	}

	// The headless Service gives the pods the names peering.peers lists, also while not ready.
	peering, ok := objects["Service/"+deployment.ServiceName]
	if !ok {
		t.Fatalf("the StatefulSet's serviceName %q is not a Service in deploy/kubernetes", deployment.ServiceName)
	}
	var headless serviceSpec
	decodeSpec(t, peering, &headless)
	if headless.ClusterIP != "None" || !headless.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v; want a headless Service (None) that lists draining pods too",
			deployment.ServiceName, headless.ClusterIP, headless.PublishNotReadyAddresses)
	}
	if len(headless.Selector) == 0 || !subsetOf(headless.Selector, deployment.Template.Metadata.Labels) {
		t.Errorf("Service %s's selector %v does not select the pods %v", deployment.ServiceName, headless.Selector, deployment.Template.Metadata.Labels)
	}
	if len(headless.Ports) != 1 || resolvePort(t, headless.Ports[0].TargetPort, ports) != ports["peering"] || headless.Ports[0].Port != ports["peering"] {
		t.Errorf("Service %s's ports %+v: want the container's peering port %d", deployment.ServiceName, headless.Ports, ports["peering"])
	}

	var service serviceSpec
	decodeSpec(t, objects["Service/pgowl"], &service)
	if len(service.Selector) == 0 || !subsetOf(service.Selector, deployment.Template.Metadata.Labels) {
		t.Errorf("the Service's selector %v does not select the pods %v", service.Selector, deployment.Template.Metadata.Labels)
	}
	for _, name := range []string{"postgres", "admin"} {
		found := false
		for _, p := range service.Ports {
			if resolvePort(t, p.TargetPort, ports) == ports[name] {
				found = true
			}
		}
		if !found {
			t.Errorf("the Service has no port to the container's %s port %d", name, ports[name])
		}
	}

	var pdb pdbSpec
	decodeSpec(t, objects["PodDisruptionBudget/pgowl"], &pdb)
	if !equalLabels(pdb.Selector.MatchLabels, deployment.Selector.MatchLabels) {
		t.Errorf("the PodDisruptionBudget selects %v, the StatefulSet %v", pdb.Selector.MatchLabels, deployment.Selector.MatchLabels)
	}
	switch {
	case pdb.MinAvailable != nil && (*pdb.MinAvailable < 1 || *pdb.MinAvailable >= deployment.Replicas):
		t.Errorf("minAvailable %d with %d replicas: want at least 1 and fewer than the replicas, or no disruption can go ahead", *pdb.MinAvailable, deployment.Replicas)
	case pdb.MinAvailable == nil && pdb.MaxUnavailable == nil:
		t.Errorf("the PodDisruptionBudget sets neither minAvailable nor maxUnavailable")
	}
	t.Logf("pgowl serve %v; ports %v; probes /readyz and /healthz on %d; preStop %ds + drain %s within a grace of %ds; peering instances %v",
		c.Args[1:], ports, ports["admin"], wait, drain, pod.TerminationGracePeriodSeconds, instances)
}

// podEnvironment returns the container's environment in pod podName as the kubelet builds it:
// metadata.name from the downward API, $(NAME) replaced by an earlier variable's value, and a
// placeholder for values from Secrets.
func podEnvironment(t *testing.T, c container, podName string) []string {
	t.Helper()
	values := map[string]string{}
	var environ []string
	for _, e := range c.Env {
		value := e.Value
		switch path := e.ValueFrom.FieldRef.FieldPath; {
		case path == "metadata.name":
			value = podName
		case path != "":
			t.Fatalf("env %s: the test does not know the downward API field %s", e.Name, path)
		case value == "":
			value = "from-a-secret"
		}
		for name, earlier := range values {
			value = strings.ReplaceAll(value, "$("+name+")", earlier)
		}
		if strings.Contains(value, "$(") {
			t.Errorf("env %s: %q refers to a variable not defined before it", e.Name, value)
		}
		values[e.Name] = value
		if strings.HasPrefix(e.Name, environmentPrefix) {
			environ = append(environ, e.Name+"="+value)
		}
	}
	return environ
}

// TestComposeFileMatchesTheBinary checks deploy/compose.yaml the same way: pgowl's command is
// serve with real flags, the configuration mounted at --config is valid, the published ports are
// the ports pgowl listens on, the health check asks /readyz on the admin port, and the stop
// grace period covers pgowl's drain.
func TestComposeFileMatchesTheBinary(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose composeFile
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	owl, ok := compose.Services["pgowl"]
	if !ok {
		t.Fatal("compose.yaml has no service pgowl")
	}
	configFile := serveConfigFlag(t, owl.Command)
	source := ""
	for _, v := range owl.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == configFile {
			source = parts[0]
		}
	}
	if source == "" {
		t.Fatalf("no volume of the pgowl service is mounted at --config %s", configFile)
	}
	document, err := os.ReadFile(filepath.Join(deployDir, source))
	if err != nil {
		t.Fatalf("the volume mounted at %s: %v", configFile, err)
	}
	cfg := loadDeployConfig(t, "deploy/"+source, string(document), owl.Command, nil)
	published := map[int]bool{}
	for _, p := range owl.Ports {
		parts := strings.Split(p, ":")
		port, err := strconv.Atoi(parts[len(parts)-1])
		if err != nil {
			t.Fatalf("port %q: %v", p, err)
		}
		published[port] = true
	}
	_, listenPort, _ := net.SplitHostPort(cfg.Listen)
	_, adminPort, _ := net.SplitHostPort(cfg.Admin.Listen)
	for _, p := range []struct{ key, port, address string }{{"listen", listenPort, cfg.Listen}, {"admin.listen", adminPort, cfg.Admin.Listen}} {
		port, _ := strconv.Atoi(p.port)
		checkListensInContainer(t, p.key, p.address, port)
		if !published[port] {
			t.Errorf("%s port %d is not published (ports %v)", p.key, port, owl.Ports)
		}
	}
	check := strings.Join(owl.Healthcheck.Test, " ")
	if !strings.Contains(check, "127.0.0.1:"+adminPort+"/readyz") || !adminPaths(t, cfg)["/readyz"] {
		t.Errorf("the health check %q does not ask /readyz on the admin port %s", check, adminPort)
	}
	grace, err := time.ParseDuration(owl.StopGracePeriod)
	if err != nil {
		t.Fatalf("stop_grace_period %q: %v", owl.StopGracePeriod, err)
	}
	if drain := shutdownDrain(t, string(document)); grace <= drain {
		t.Errorf("stop_grace_period %s does not cover pgowl's drain of %s", grace, drain)
	}
}

// readManifests decodes every YAML document under dir, keyed by kind/name.
func readManifests(t *testing.T, dir string) map[string]k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under %s: %v", dir, err)
	}
	objects := map[string]k8sObject{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		decoder := yaml.NewDecoder(strings.NewReader(string(raw)))
		for {
			var object k8sObject
			if err := decoder.Decode(&object); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", file, err)
			}
			if object.Kind == "" || object.APIVersion == "" || object.Metadata.Name == "" {
				t.Fatalf("%s: a document without kind, apiVersion or metadata.name", file)
			}
			key := object.Kind + "/" + object.Metadata.Name
			if _, twice := objects[key]; twice {
				t.Fatalf("%s: a second %s", file, key)
			}
			objects[key] = object
		}
	}
	return objects
}

// decodeSpec decodes an object's spec into out.
func decodeSpec(t *testing.T, object k8sObject, out any) {
	t.Helper()
	if err := object.Spec.Decode(out); err != nil {
		t.Fatalf("%s %s: spec: %v", object.Kind, object.Metadata.Name, err)
	}
}

// serveConfigFlag checks that args run pgowl serve with flags serve knows, and returns --config.
func serveConfigFlag(t *testing.T, args []string) string {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("pgowl is run with %v, want serve and its flags", args)
	}
	serve, _, err := newRootCommand().Find(args[:1])
	if err != nil || serve.Name() != "serve" {
		t.Fatalf("pgowl has no serve command: %v", err)
	}
	if err := serve.ParseFlags(args[1:]); err != nil {
		t.Fatalf("serve refuses the arguments %v: %v", args[1:], err)
	}
	file, err := serve.Flags().GetString("config")
	if err != nil || file == "" {
		t.Fatalf("the arguments %v name no --config file", args)
	}
	return file
}

// loadDeployConfig loads document as serve would with args and environ, and fails t if pgowl
// would refuse it.
func loadDeployConfig(t *testing.T, what, document string, args, environ []string) config.Config {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pgowl.yaml")
	if err := os.WriteFile(file, []byte(document), 0o600); err != nil {
		t.Fatal(err)
	}
	serve, _, _ := newRootCommand().Find(args[:1])
	if err := serve.ParseFlags(args[1:]); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(file, serve.Flags(), environ)
	if err != nil {
		t.Fatalf("pgowl refuses the configuration of %s: %v", what, err)
	}
	return cfg
}

// checkListensInContainer checks that address listens on all interfaces on port.
func checkListensInContainer(t *testing.T, key, address string, port int) {
	t.Helper()
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		t.Errorf("%s %q: %v", key, address, err)
		return
	}
	if host != "0.0.0.0" && host != "" && host != "::" {
		t.Errorf("%s is %s: in a container it must listen on all interfaces (0.0.0.0)", key, address)
	}
	if portText != strconv.Itoa(port) {
		t.Errorf("%s listens on port %s, the container declares %d", key, portText, port)
	}
}

// adminPaths reports which of the probe and scrape paths the admin listener built from cfg serves.
func adminPaths(t *testing.T, cfg config.Config) map[string]bool {
	t.Helper()
	mux, ok := admin.New(admin.Sources{Config: cfg}).Handler().(*http.ServeMux)
	if !ok {
		t.Fatal("the admin handler is not a ServeMux; the test cannot ask it which paths it serves")
	}
	served := map[string]bool{}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/no-such-path"} {
		_, pattern := mux.Handler(httptest.NewRequest(http.MethodGet, path, nil))
		served[path] = pattern == "GET "+path
	}
	if served["/no-such-path"] {
		t.Fatal("the admin listener claims to serve /no-such-path: the check cannot tell paths apart")
	}
	return served
}

// resolvePort turns a probe's or Service's port, a number or a container port's name, into a number.
func resolvePort(t *testing.T, port yaml.Node, named map[string]int) int {
	t.Helper()
	if n, err := strconv.Atoi(port.Value); err == nil {
		return n
	}
	return named[port.Value]
}

// shutdownDrain is how long pgowl may take to drain after SIGTERM with the configuration document:
// its shutdown_timeout when the binary has that key, else the fixed grace.
func shutdownDrain(t *testing.T, document string) time.Duration {
	t.Helper()
	for _, key := range config.Keys() {
		if key.Path != "shutdown_timeout" {
			continue
		}
		value := key.Default
		var settings map[string]any
		if err := yaml.Unmarshal([]byte(document), &settings); err == nil {
			if set, ok := settings["shutdown_timeout"].(string); ok {
				value = set
			}
		}
		d, err := time.ParseDuration(value)
		if err != nil {
			t.Fatalf("shutdown_timeout %q: %v", value, err)
		}
		return d
	}
	return fixedShutdownGrace
}

func subsetOf(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func equalLabels(a, b map[string]string) bool {
	return len(a) == len(b) && subsetOf(a, b)
}
