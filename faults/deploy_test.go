package faults

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deployRun is one run of scripts/deploy.sh against recording stand-ins for
// the az and terraform command-line tools (the script's only dependencies;
// no Azure is reachable here).
type deployRun struct {
	err    error
	stderr string
	calls  []string // "terraform …" / "az …", in order
}

// runDeploy copies scripts/deploy.sh into a scratch checkout (with a package
// and a tfvars file) and runs it with stdin from /dev/null, as a pipeline
// does, with env added to a minimal environment.
func runDeploy(t *testing.T, env []string, args ...string) deployRun {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"scripts", "dist", "infra", "bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile("../scripts/deploy.sh")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(root, "calls.log")
	files := map[string]string{
		"scripts/deploy.sh":             string(script),
		"dist/ehmirror-functionapp.zip": "PK",
		"infra/terraform.tfvars":        `location = "westeurope"`,
		"bin/az": `#!/bin/sh
echo "az $*" >>"` + log + `"
case "$*" in "account show --query id -o tsv") echo 00000000-0000-0000-0000-000000000005 ;; esac
`,
		"bin/terraform": `#!/bin/sh
echo "terraform $*" >>"` + log + `"
case "$*" in
*"output -raw function_app_name") echo func-ehmirror-prod-abc ;;
*"output -raw resource_group_name") echo rg-ehmirror-prod ;;
*"output -raw function_app_default_hostname") echo func-ehmirror-prod-abc.azurewebsites.net ;;
esac
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "deploy.sh"))
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = append([]string{"PATH=" + filepath.Join(root, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + root}, env...)
	cmd.Stdin = nil // /dev/null: no terminal
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	var calls []string
	if b, err := os.ReadFile(log); err == nil {
		calls = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	return deployRun{err: runErr, stderr: stderr.String(), calls: calls}
}

// apply returns the arguments of the terraform apply call, if any.
func (r deployRun) apply() ([]string, bool) {
	for _, c := range r.calls {
		f := strings.Fields(c)
		if len(f) > 2 && f[0] == "terraform" && f[2] == "apply" {
			return f[3:], true
		}
	}
	return nil, false
}

// TestDeployRunsWithoutATerminal (issue 14, defect 5): in a pipeline (no
// terminal) terraform cannot ask for approval. With CI=true or --yes the
// script applies with -auto-approve and goes on to the zip deployment;
// without either it stops before terraform with a one-line reason instead
// of failing half-way with "error asking for approval: EOF".
func TestDeployRunsWithoutATerminal(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"CI=true", []string{"CI=true"}, nil},
		{"--yes", nil, []string{"--yes"}},
		{"-y with apply arguments", []string{"CI=false"}, []string{"-y", "-var-file=prod.tfvars"}},
		{"-auto-approve as before", nil, []string{"-auto-approve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runDeploy(t, tc.env, tc.args...)
			if r.err != nil {
				t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
			}
			apply, ok := r.apply()
			if !ok {
				t.Fatalf("terraform apply was not run; calls: %q", r.calls)
			}
			var approve int
			for _, a := range apply {
				approve += strings.Count(a, "-auto-approve")
				if a == "--yes" || a == "-y" {
					t.Errorf("apply got the script's flag %s: %q", a, apply)
				}
			}
			if approve != 1 {
				t.Errorf("apply arguments %q, want exactly one -auto-approve", apply)
			}
			for _, a := range tc.args {
				if strings.HasPrefix(a, "-var") && !slices.Contains(apply, a) {
					t.Errorf("apply arguments %q lost %s", apply, a)
				}
			}
			if last := r.calls[len(r.calls)-2]; !strings.HasPrefix(last, "az functionapp deployment source config-zip --resource-group rg-ehmirror-prod --name func-ehmirror-prod-abc") {
				t.Errorf("no zip deployment to the app Terraform created; calls: %q", r.calls)
			}
		})
	}
	for _, env := range [][]string{nil, {"CI=false"}, {"CI="}} {
		r := runDeploy(t, env)
		if r.err == nil {
			t.Errorf("env %q: deploy without a terminal and without --yes succeeded", env)
		}
		if _, ok := r.apply(); ok {
			t.Errorf("env %q: terraform apply ran without a terminal to confirm it: %q", env, r.calls)
		}
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "--yes") || !strings.Contains(r.stderr, "CI=true") {
			t.Errorf("env %q: stderr %q, want one line naming --yes and CI=true", env, r.stderr)
		}
	}
}

// TestDeployPassesTheSubscription: the azurerm provider needs
// ARM_SUBSCRIPTION_ID; the script takes it from the environment or from
// the az CLI's current subscription.
func TestDeployPassesTheSubscription(t *testing.T) {
	r := runDeploy(t, []string{"CI=true"})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
	}
	if !slices.Contains(r.calls, "az account show --query id -o tsv") {
		t.Errorf("the subscription was not read from az: %q", r.calls)
	}
	r = runDeploy(t, []string{"CI=true", "ARM_SUBSCRIPTION_ID=11111111-1111-1111-1111-111111111111"})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
	}
	if slices.Contains(r.calls, "az account show --query id -o tsv") {
		t.Errorf("ARM_SUBSCRIPTION_ID was set but the script asked az: %q", r.calls)
	}
}

// TestHostJSONKeepsEveryRequestAndTrace (issue 24, item 4): Application
// Insights' adaptive sampling is on by default for every telemetry type,
// and every log alert counts rows of AppRequests (MirrorTimer executions)
// or AppTraces (the drain lines; lag-growing needs exactly N of them). A
// sampled-out row is a missed alert, so host.json must exclude Request and
// Trace from sampling (or turn sampling off).
func TestHostJSONKeepsEveryRequestAndTrace(t *testing.T) {
	var host struct {
		Logging struct {
			ApplicationInsights *struct {
				SamplingSettings *struct {
					IsEnabled     *bool  `json:"isEnabled"`
					ExcludedTypes string `json:"excludedTypes"`
				} `json:"samplingSettings"`
			} `json:"applicationInsights"`
		} `json:"logging"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "../host.json")), &host); err != nil {
		t.Fatalf("host.json: %v", err)
	}
	ai := host.Logging.ApplicationInsights
	if ai == nil || ai.SamplingSettings == nil {
		t.Fatal("host.json has no logging.applicationInsights.samplingSettings: adaptive sampling is on for requests and traces")
	}
	s := ai.SamplingSettings
	if s.IsEnabled != nil && !*s.IsEnabled {
		return // sampling off: every row arrives
	}
	excluded := strings.Split(s.ExcludedTypes, ";")
	for _, typ := range []string{"Request", "Trace"} {
		if !slices.Contains(excluded, typ) {
			t.Errorf("host.json samples %s telemetry (excludedTypes %q): a log alert may miss its rows", typ, s.ExcludedTypes)
		}
	}
}
