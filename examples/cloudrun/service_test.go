package cloudrun

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// The subset of a Knative serving.knative.dev/v1 Service that Cloud Run
// accepts and this example uses. Decoding is strict (KnownFields), so a
// misspelt key (livenesProbe) is a problem rather than a setting Cloud Run
// would silently not get.
type service struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Template struct {
			Metadata objectMeta   `yaml:"metadata"`
			Spec     revisionSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type objectMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type revisionSpec struct {
	ServiceAccountName   string      `yaml:"serviceAccountName"`
	ContainerConcurrency int         `yaml:"containerConcurrency"`
	TimeoutSeconds       int         `yaml:"timeoutSeconds"`
	Containers           []container `yaml:"containers"`
	Volumes              []volume    `yaml:"volumes"`
}

type container struct {
	Name       string   `yaml:"name"`
	Image      string   `yaml:"image"`
	Command    []string `yaml:"command"`
	Args       []string `yaml:"args"`
	WorkingDir string   `yaml:"workingDir"`
	Ports      []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env       []envVar `yaml:"env"`
	Resources struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
	StartupProbe  *probe `yaml:"startupProbe"`
	LivenessProbe *probe `yaml:"livenessProbe"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *secretRef `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type secretRef struct {
	Name string `yaml:"name"` // the Secret Manager secret
	Key  string `yaml:"key"`  // its version
}

type probe struct {
	HTTPGet *struct {
		Path        string `yaml:"path"`
		Port        int    `yaml:"port"`
		HTTPHeaders []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"httpHeaders"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port int `yaml:"port"`
	} `yaml:"tcpSocket"`
	GRPC *struct {
		Port    int    `yaml:"port"`
		Service string `yaml:"service"`
	} `yaml:"grpc"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode *int   `yaml:"defaultMode"`
		Items       []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
			Mode *int   `yaml:"mode"`
		} `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir *struct {
		Medium    string `yaml:"medium"`
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
}

// Names the files agree on.
const (
	ferryContainer   = "ferry"          // the sidecar, named in container-dependencies
	receiverEnv      = "WEBHOOK_SECRET" // what examples/node-receiver/server.js reads
	receiverDBEnv    = "MONGODB_URI"    // where its idempotency records live
	dependencyKey    = "run.googleapis.com/container-dependencies"
	cpuThrottlingKey = "run.googleapis.com/cpu-throttling"
	minScaleKey      = "autoscaling.knative.dev/minScale"
	maxScaleKey      = "autoscaling.knative.dev/maxScale"
	egressKey        = "run.googleapis.com/vpc-access-egress"
	interfacesKey    = "run.googleapis.com/network-interfaces"
)

// problems collects every mismatch, so one run names them all.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// check returns what is wrong with the example: service.yaml, the
// ferry.yaml it mounts, and the Dockerfile whose ENTRYPOINT runs ferry.
func check(serviceYAML, ferryYAML, dockerfile []byte) problems {
	var p problems
	var svc service
	dec := yaml.NewDecoder(bytes.NewReader(serviceYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&svc); err != nil {
		p.add("service.yaml: %v", err)
		return p
	}
	if svc.APIVersion != "serving.knative.dev/v1" || svc.Kind != "Service" {
		p.add("service.yaml: apiVersion/kind is %q/%q, want serving.knative.dev/v1 / Service (what `gcloud run services replace` takes)", svc.APIVersion, svc.Kind)
	}
	spec := svc.Spec.Template.Spec
	annotations := svc.Spec.Template.Metadata.Annotations

	// Containers: unique names, exactly one ingress container.
	byName := map[string]*container{}
	var ingress []*container
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name == "" || byName[c.Name] != nil {
			p.add("service.yaml: containers[%d]: every container needs a unique name (container-dependencies refers to them)", i)
		}
		byName[c.Name] = c
		if len(c.Ports) > 0 {
			ingress = append(ingress, c)
		}
	}
	if len(ingress) != 1 {
		p.add("service.yaml: %d containers have a ports entry; exactly one may (the ingress container, the app)", len(ingress))
		return p
	}
	app := ingress[0]
	if len(app.Ports) != 1 || app.Ports[0].ContainerPort <= 0 {
		p.add("service.yaml: container %q: want exactly one ports entry with a containerPort", app.Name)
		return p
	}
	appPort := app.Ports[0].ContainerPort
	if hasEnv(app, "PORT") {
		p.add("service.yaml: container %q sets PORT: Cloud Run reserves it and sets it from containerPort", app.Name)
	}
	ferry := byName[ferryContainer]
	if ferry == nil {
		p.add("service.yaml: no container named %q", ferryContainer)
		return p
	}
	if ferry == app {
		p.add("service.yaml: the ferry container has the ports entry; the app must be the ingress container and ferry a sidecar without ports")
		return p
	}
	if hasEnv(ferry, "PORT") {
		p.add("service.yaml: container %q sets PORT: ferry would listen on $PORT instead of its listen address, where its probes point", ferryContainer)
	}

	// ferry.yaml, parsed as ferry parses it, with every ${NAME} supplied by
	// the ferry container's secret environment variables (dummy values).
	secretEnv := map[string]secretRef{}
	for _, e := range ferry.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := *e.ValueFrom.SecretKeyRef
			if ref.Name == "" || ref.Key == "" {
				p.add("service.yaml: container %q env %s: secretKeyRef needs name (the secret) and key (its version)", ferryContainer, e.Name)
			}
			secretEnv[e.Name] = ref
		case e.Value != "":
		default:
			p.add("service.yaml: container %q env %s: no value and no secretKeyRef", ferryContainer, e.Name)
		}
	}
	dummies := map[string]string{} // dummy value -> variable
	var unset []string
	lookup := func(name string) (string, bool) {
		if _, ok := secretEnv[name]; !ok {
			if !slices.Contains(unset, name) {
				unset = append(unset, name)
			}
			return "", false
		}
		v := dummy(name)
		dummies[v] = name
		return v, true
	}
	cfg, err := config.Parse(ferryYAML, lookup)
	for _, name := range unset {
		p.add("ferry.yaml references ${%s}, but container %q has no env %s from a secret (valueFrom.secretKeyRef)", name, ferryContainer, name)
	}
	if err != nil {
		p.add("ferry.yaml does not pass config.Parse (ferry validate): %v", err)
		return p
	}

	// Ports: ferry listens on its listen address; the app on containerPort.
	_, portText, err := net.SplitHostPort(cfg.Listen)
	listenPort, perr := strconv.Atoi(portText)
	if err != nil || perr != nil {
		p.add("ferry.yaml: listen %q has no numeric port", cfg.Listen)
		return p
	}
	if listenPort == appPort {
		p.add("ferry.yaml: listen port %d is the app's port: the containers share one network namespace, so ferry needs another (e.g. 9090)", listenPort)
	}
	for _, pr := range []struct {
		name string
		pr   *probe
	}{{"startupProbe", ferry.StartupProbe}, {"livenessProbe", ferry.LivenessProbe}} {
		switch {
		case pr.pr == nil:
			p.add("service.yaml: container %q has no %s (want httpGet /healthz on port %d)", ferryContainer, pr.name, listenPort)
		case pr.pr.HTTPGet == nil:
			p.add("service.yaml: container %q %s: want httpGet /healthz on port %d", ferryContainer, pr.name, listenPort)
		default:
			if pr.pr.HTTPGet.Path != "/healthz" {
				p.add("service.yaml: container %q %s path is %q, want /healthz (/readyz turns 503 for a failed stream, which a restart does not fix)", ferryContainer, pr.name, pr.pr.HTTPGet.Path)
			}
			if pr.pr.HTTPGet.Port != listenPort {
				p.add("service.yaml: container %q %s port is %d, but ferry.yaml listens on %d (a sidecar gets no PORT variable)", ferryContainer, pr.name, pr.pr.HTTPGet.Port, listenPort)
			}
			checkTiming(&p, ferryContainer, pr.name, pr.pr)
		}
	}

	// Webhook sinks post to the app on localhost:<containerPort>, signed
	// with the secret the app verifies with.
	appSecret := envRef(app, receiverEnv)
	webhooks := 0
	for _, st := range cfg.Streams {
		wh := st.Sink.Webhook
		if wh == nil {
			continue
		}
		webhooks++
		u, err := url.Parse(wh.URL)
		if err != nil {
			p.add("ferry.yaml: stream %s: webhook url does not parse", st.Name)
			continue
		}
		if u.Scheme != "http" || !slices.Contains([]string{"localhost", "127.0.0.1", "::1"}, u.Hostname()) {
			p.add("ferry.yaml: stream %s: webhook url %s://%s…: want http://localhost:%d/… (the app, inside the instance)", st.Name, u.Scheme, u.Host, appPort)
		}
		if u.Port() != strconv.Itoa(appPort) {
			p.add("ferry.yaml: stream %s: webhook url port %q, but the app's containerPort is %d", st.Name, u.Port(), appPort)
		}
		variable, ok := dummies[wh.Secret.Reveal()]
		switch {
		case !ok:
			p.add("ferry.yaml: stream %s: webhook secret is not a ${NAME} reference to a secret", st.Name)
		case appSecret == nil:
			p.add("service.yaml: container %q has no env %s from a secret: the receiver cannot verify ferry's signatures", app.Name, receiverEnv)
		case *appSecret != secretEnv[variable]:
			p.add("service.yaml: container %q env %s is secret %s version %s, but ferry signs stream %s with %s from secret %s version %s",
				app.Name, receiverEnv, appSecret.Name, appSecret.Key, st.Name, variable, secretEnv[variable].Name, secretEnv[variable].Key)
		}
	}
	if webhooks == 0 {
		p.add("ferry.yaml: no stream has a webhook sink posting to the app")
	}
	// The receiver keeps its idempotency records in MongoDB, shared by
	// every instance: a record in one container absorbs no replay, since a
	// replay after a takeover reaches another instance.
	if envRef(app, receiverDBEnv) == nil {
		p.add("service.yaml: container %q has no env %s from a secret: the receiver's idempotency records, shared by every instance, live there", app.Name, receiverDBEnv)
	}

	// The configuration file: where the ferry container reads it, and the
	// secret volume item mounted there.
	cfgPath, err := configPath(ferry, dockerfile)
	if err != nil {
		p.add("service.yaml: container %q: %v", ferryContainer, err)
	} else {
		checkMount(&p, ferry, spec.Volumes, cfgPath)
	}

	// Start order: ferry waits for the app, whose startup probe tells Cloud
	// Run when it listens.
	deps := map[string][]string{}
	if err := json.Unmarshal([]byte(annotations[dependencyKey]), &deps); err != nil {
		p.add("service.yaml: annotation %s must be JSON like '{\"%s\":[\"%s\"]}': %v", dependencyKey, ferryContainer, app.Name, err)
	}
	for name, on := range deps {
		for _, d := range on {
			if byName[name] == nil || byName[d] == nil {
				p.add("service.yaml: annotation %s names a container that does not exist (%s -> %s)", dependencyKey, name, d)
			} else if byName[d].StartupProbe == nil {
				p.add("service.yaml: %s waits for %s, which has no startupProbe: Cloud Run then has nothing to wait for", name, d)
			}
		}
	}
	if !slices.Contains(deps[ferryContainer], app.Name) {
		p.add("service.yaml: annotation %s must make %s wait for %s ('{\"%s\":[\"%s\"]}'), so that the first POSTs find a listening receiver", dependencyKey, ferryContainer, app.Name, ferryContainer, app.Name)
	}
	if slices.Contains(deps[app.Name], ferryContainer) {
		p.add("service.yaml: %s waits for %s: the app would not serve until MongoDB answers ferry's probe", app.Name, ferryContainer)
	}
	if sp := app.StartupProbe; sp != nil {
		port := 0
		switch {
		case sp.TCPSocket != nil:
			port = sp.TCPSocket.Port
		case sp.HTTPGet != nil:
			port = sp.HTTPGet.Port
		}
		if port != appPort {
			p.add("service.yaml: container %q startupProbe port is %d, want its containerPort %d", app.Name, port, appPort)
		}
		checkTiming(&p, app.Name, "startupProbe", sp)
	}

	// Instance-based billing and instances that stay up.
	if v := annotations[cpuThrottlingKey]; v != "false" {
		p.add("service.yaml: annotation %s is %q, want \"false\": ferry works between requests (leases, change streams)", cpuThrottlingKey, v)
	}
	minScale, err := strconv.Atoi(annotations[minScaleKey])
	if err != nil || minScale < 1 {
		p.add("service.yaml: annotation %s is %q, want an integer >= 1: scaled to zero, nothing consumes the change streams", minScaleKey, annotations[minScaleKey])
	}
	if v, ok := annotations[maxScaleKey]; ok {
		if maxScale, err := strconv.Atoi(v); err != nil || maxScale < minScale {
			p.add("service.yaml: annotation %s is %q, want an integer >= %s", maxScaleKey, v, minScaleKey)
		}
	}
	if v, ok := annotations[egressKey]; ok && v != "all-traffic" && v != "private-ranges-only" {
		p.add("service.yaml: annotation %s is %q, want all-traffic or private-ranges-only", egressKey, v)
	}
	if v, ok := annotations[interfacesKey]; ok {
		var nics []struct {
			Network    string `json:"network"`
			Subnetwork string `json:"subnetwork"`
		}
		if err := json.Unmarshal([]byte(v), &nics); err != nil || len(nics) != 1 || nics[0].Network == "" {
			p.add("service.yaml: annotation %s must be JSON like '[{\"network\":\"N\",\"subnetwork\":\"S\"}]'", interfacesKey)
		}
	}
	return p
}

// checkTiming applies Cloud Run's rule that a probe's timeout fits in its
// period.
func checkTiming(p *problems, name, kind string, pr *probe) {
	if pr.PeriodSeconds > 0 && pr.TimeoutSeconds > pr.PeriodSeconds {
		p.add("service.yaml: container %q %s: timeoutSeconds %d exceeds periodSeconds %d", name, kind, pr.TimeoutSeconds, pr.PeriodSeconds)
	}
}

// checkMount checks that a secret volume item of c is the file cfgPath,
// and Cloud Run's rules on secret mount paths.
func checkMount(p *problems, c *container, volumes []volume, cfgPath string) {
	found := false
	seen := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if !path.IsAbs(mp) || mp == "/" {
			p.add("service.yaml: container %q mountPath %q: want an absolute directory other than /", c.Name, m.MountPath)
		}
		for _, reserved := range []string{"/dev", "/proc", "/sys"} {
			if mp == reserved || strings.HasPrefix(mp, reserved+"/") {
				p.add("service.yaml: container %q mountPath %q: Cloud Run does not mount secrets under %s", c.Name, m.MountPath, reserved)
			}
		}
		if seen[mp] {
			p.add("service.yaml: container %q mounts two volumes at %s", c.Name, mp)
		}
		seen[mp] = true
		var v *volume
		for i := range volumes {
			if volumes[i].Name == m.Name {
				v = &volumes[i]
			}
		}
		if v == nil {
			p.add("service.yaml: container %q mounts volume %q, which spec.volumes does not define", c.Name, m.Name)
			continue
		}
		if v.Secret == nil {
			continue
		}
		files := map[string]string{} // file in the volume -> secret version
		if len(v.Secret.Items) == 0 {
			files[v.Secret.SecretName] = "latest"
		}
		for _, it := range v.Secret.Items {
			files[it.Path] = it.Key
		}
		for file, version := range files {
			if path.Join(mp, file) != cfgPath {
				continue
			}
			found = true
			if version == "latest" || version == "" {
				p.add("service.yaml: volume %q: pin the configuration's secret version (items[].key: \"1\"), not %q: instances started later would read a newer file than the running ones", v.Name, version)
			}
		}
	}
	if !found {
		p.add("service.yaml: container %q reads its configuration from %s, but no secret volume item is mounted there (mountPath + items[].path)", c.Name, cfgPath)
	}
}

// configPath returns the file the container's ferry reads: the -c flag of
// its command line, which is the container's command/args or the image's
// ENTRYPOINT/CMD from the Dockerfile.
func configPath(c *container, dockerfile []byte) (string, error) {
	entrypoint, cmd, err := dockerfileExec(dockerfile)
	if err != nil {
		return "", err
	}
	argv := slices.Concat(entrypoint, cmd)
	switch {
	case len(c.Command) > 0:
		argv = slices.Concat(c.Command, c.Args)
	case len(c.Args) > 0:
		argv = slices.Concat(entrypoint, c.Args)
	}
	if len(argv) < 2 || path.Base(argv[0]) != "ferry" || argv[1] != "run" {
		return "", fmt.Errorf("runs %q, not `ferry run`", argv)
	}
	// Parsed as Go's flag package does: flags end at the first non-flag
	// argument or "--", and a later -c wins.
	file := "ferry.yaml" // ferry run's default, relative to the working directory
	args := argv[2:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if name != "c" {
			return "", fmt.Errorf("`ferry run` has no flag %q", a)
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", fmt.Errorf("-c without a value in %q", argv)
			}
			i++
			value = args[i]
		}
		file = value
	}
	if !path.IsAbs(file) {
		wd := c.WorkingDir
		if wd == "" {
			wd = "/"
		}
		file = path.Join(wd, file)
	}
	return path.Clean(file), nil
}

// dockerfileExec returns the exec-form ENTRYPOINT and CMD of the final
// stage of a Dockerfile.
func dockerfileExec(dockerfile []byte) (entrypoint, cmd []string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		instr, rest, _ := strings.Cut(line, " ")
		var dst *[]string
		switch strings.ToUpper(instr) {
		case "FROM": // a new stage starts over
			entrypoint, cmd = nil, nil
			continue
		case "ENTRYPOINT":
			dst = &entrypoint
		case "CMD":
			dst = &cmd
		default:
			continue
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(rest)), dst); err != nil {
			return nil, nil, fmt.Errorf("Dockerfile: %s must be in exec form ([\"…\"]): %v", instr, err)
		}
	}
	if len(entrypoint) == 0 {
		return nil, nil, fmt.Errorf("Dockerfile: no ENTRYPOINT")
	}
	return entrypoint, cmd, sc.Err()
}

func hasEnv(c *container, name string) bool {
	return slices.ContainsFunc(c.Env, func(e envVar) bool { return e.Name == name })
}

// envRef returns the secret that env var name of c comes from, or nil.
func envRef(c *container, name string) *secretRef {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}

// dummy returns a value for environment variable name that passes the
// field it is likely used in, distinct for every name.
func dummy(name string) string {
	sum := sha256.Sum256([]byte(name))
	switch {
	case strings.Contains(name, "SECRET"):
		return "whsec_" + base64.StdEncoding.EncodeToString(sum[:])
	case strings.Contains(name, "URI"):
		return fmt.Sprintf("mongodb+srv://ferry:%x@cluster0.example.net/?retryWrites=true&w=majority", sum[:4])
	default:
		return fmt.Sprintf("dummy-%x", sum[:4])
	}
}

func readExample(t *testing.T) (svc, ferry, dockerfile []byte) {
	t.Helper()
	var err error
	if svc, err = os.ReadFile("service.yaml"); err != nil {
		t.Fatal(err)
	}
	if ferry, err = os.ReadFile("ferry.yaml"); err != nil {
		t.Fatal(err)
	}
	if dockerfile, err = os.ReadFile("../../Dockerfile"); err != nil {
		t.Fatal(err)
	}
	return svc, ferry, dockerfile
}

func TestExampleIsConsistent(t *testing.T) {
	svc, ferry, dockerfile := readExample(t)
	for _, problem := range check(svc, ferry, dockerfile) {
		t.Error(problem)
	}
}

// TestCheckCatches breaks the example one way at a time and expects check
// to name the break: a check that cannot fail proves nothing.
func TestCheckCatches(t *testing.T) {
	const ferryHeader = "        - name: ferry\n          image: REGION-docker.pkg.dev/PROJECT_ID/ferry/ferry:v1\n"
	const appSecret = "            - name: WEBHOOK_SECRET\n              valueFrom:\n                secretKeyRef:\n                  name: webhook-secret\n"
	cases := []struct {
		name      string
		file      string // service, ferry or dockerfile
		old, new  string
		wantMatch string
	}{
		{"kind", "service", "kind: Service", "kind: Job", "apiVersion/kind"},
		{"misspelt key", "service", "livenessProbe:", "livenesProbe:", "livenesProbe"},
		{"app port differs from the webhook url", "service", "containerPort: 8080", "containerPort: 8081", "webhook url port \"8080\", but the app's containerPort is 8081"},
		{"webhook url port", "ferry", "localhost:8080/ferry/orders", "localhost:3000/ferry/orders", "stream orders: webhook url port \"3000\""},
		{"webhook url host", "ferry", "http://localhost:8080/ferry/orders", "https://orders.example.com:8080/ferry/orders", "want http://localhost:8080"},
		{"ports on ferry", "service", ferryHeader, ferryHeader + "          ports:\n            - containerPort: 9090\n", "2 containers have a ports entry"},
		{"PORT on ferry", "service", ferryHeader + "          env:\n", ferryHeader + "          env:\n            - name: PORT\n              value: \"9090\"\n", "sets PORT"},
		{"listen port differs from the probes", "ferry", `listen: ":9090"`, `listen: ":9091"`, "ferry.yaml listens on 9091"},
		{"listen port is the app's", "ferry", `listen: ":9090"`, `listen: ":8080"`, "is the app's port"},
		{"liveness on /readyz", "service", "path: /healthz\n              port: 9090\n            periodSeconds: 30", "path: /readyz\n              port: 9090\n            periodSeconds: 30", `livenessProbe path is "/readyz"`},
		{"no startup probe", "service", "          startupProbe:\n            httpGet:\n              path: /healthz\n              port: 9090\n            periodSeconds: 3\n            timeoutSeconds: 3\n            failureThreshold: 20\n", "", "has no startupProbe"},
		{"mount path", "service", "mountPath: /etc/ferry", "mountPath: /etc/ferry-config", "reads its configuration from /etc/ferry/ferry.yaml"},
		{"mount under /proc", "service", "mountPath: /etc/ferry", "mountPath: /proc/ferry", "under /proc"},
		{"item path", "service", "path: ferry.yaml", "path: config.yaml", "no secret volume item is mounted there"},
		{"config version latest", "service", "              - key: \"1\"\n                path: ferry.yaml", "              - key: latest\n                path: ferry.yaml", "pin the configuration's secret version"},
		{"Dockerfile path", "dockerfile", "/etc/ferry/ferry.yaml", "/config/ferry.yaml", "reads its configuration from /config/ferry.yaml"},
		{"args override", "service", ferryHeader, ferryHeader + "          args: [-c, /etc/other/ferry.yaml]\n", "reads its configuration from /etc/other/ferry.yaml"},
		{"command override", "service", ferryHeader, ferryHeader + "          command: [/ferry, run, -c=/srv/ferry.yaml]\n", "reads its configuration from /srv/ferry.yaml"},
		{"relative default", "service", ferryHeader, ferryHeader + "          command: [/ferry, run]\n          workingDir: /srv\n", "reads its configuration from /srv/ferry.yaml"},
		{"unknown flag", "service", ferryHeader, ferryHeader + "          args: [-config, /etc/ferry/ferry.yaml]\n", "has no flag \"-config\""},
		{"not ferry run", "service", ferryHeader, ferryHeader + "          command: [/ferry, status]\n", "not `ferry run`"},
		{"dependency reversed", "service", `'{"ferry":["app"]}'`, `'{"app":["ferry"]}'`, "must make ferry wait for app"},
		{"dependency missing", "service", `run.googleapis.com/container-dependencies: '{"ferry":["app"]}'`, `run.googleapis.com/startup-cpu-boost: "true"`, "must be JSON"},
		{"app without startup probe", "service", "          startupProbe:\n            tcpSocket:", "          livenessProbe:\n            tcpSocket:", "which has no startupProbe"},
		{"app startup probe port", "service", "tcpSocket:\n              port: 8080", "tcpSocket:\n              port: 8081", "startupProbe port is 8081"},
		{"cpu throttled", "service", `run.googleapis.com/cpu-throttling: "false"`, `run.googleapis.com/cpu-throttling: "true"`, "cpu-throttling"},
		{"scale to zero", "service", `minScale: "2"`, `minScale: "0"`, "minScale"},
		{"max below min", "service", `maxScale: "10"`, `maxScale: "1"`, "maxScale"},
		{"probe timeout over period", "service", "periodSeconds: 30\n            timeoutSeconds: 5", "periodSeconds: 3\n            timeoutSeconds: 5", "exceeds periodSeconds"},
		{"secret env renamed", "service", ferryHeader + "          env:\n            - name: MONGODB_URI", ferryHeader + "          env:\n            - name: MONGO_URI", "references ${MONGODB_URI}"},
		{"app without the records' database", "service", "                  key: \"1\"\n            # The receiver library's idempotency records (shared by every\n            # instance, committed with each effect) and the effects.\n            - name: MONGODB_URI", "                  key: \"1\"\n            - name: MONGO_URL", "has no env MONGODB_URI"},
		{"reference without a secret", "ferry", "database: ferry\n", "database: ${STATE_DB:-ferry}\n", "references ${STATE_DB}"},
		{"config invalid", "ferry", "mode: idempotent     # ledger", "mode: exactly-once  # ledger", "does not pass config.Parse"},
		{"app verifies with another secret", "service", appSecret, strings.Replace(appSecret, "webhook-secret", "other-secret", 1), "env WEBHOOK_SECRET is secret other-secret"},
		{"egress value", "service", "vpc-access-egress: all-traffic", "vpc-access-egress: everything", "all-traffic or private-ranges-only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			files["service"], files["ferry"], files["dockerfile"] = readExample(t)
			if !bytes.Contains(files[tc.file], []byte(tc.old)) {
				t.Fatalf("%s does not contain %q: update the mutation", tc.file, tc.old)
			}
			files[tc.file] = bytes.Replace(files[tc.file], []byte(tc.old), []byte(tc.new), 1)
			got := check(files["service"], files["ferry"], files["dockerfile"])
			for _, problem := range got {
				if strings.Contains(problem, tc.wantMatch) {
					return
				}
			}
			t.Errorf("no problem mentions %q; got %q", tc.wantMatch, got)
		})
	}
}
