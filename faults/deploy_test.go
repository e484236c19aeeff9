package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	stdout string
	stderr string
	calls  []string // "terraform …" / "az …" / "curl METHOD URL", in order
	argv   string   // every argument curl was given
	// localOverride: the run left infra/backend_override.tf (--local-state).
	localOverride bool
}

// init returns the arguments of the terraform init call, if any.
func (r deployRun) init() ([]string, bool) {
	for _, c := range r.calls {
		f := strings.Fields(c)
		if len(f) > 2 && f[0] == "terraform" && f[2] == "init" {
			return f[3:], true
		}
	}
	return nil, false
}

// index returns the position of the first call with prefix, or -1.
func (r deployRun) index(prefix string) int {
	return slices.IndexFunc(r.calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// lastIndex returns the position of the last call with prefix, or -1.
func (r deployRun) lastIndex(prefix string) int {
	for i := len(r.calls) - 1; i >= 0; i-- {
		if strings.HasPrefix(r.calls[i], prefix) {
			return i
		}
	}
	return -1
}

// count returns how many calls start with prefix.
func (r deployRun) count(prefix string) int {
	n := 0
	for _, c := range r.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// deployScenario is what the stand-ins answer after terraform apply.
type deployScenario struct {
	// status holds the answers of /api/status, one per call, each
	// "CODE BODY"; the last one repeats. Empty: ready at once.
	status []string
	// refs holds the answers of the Key Vault reference query (names of
	// unresolved settings, " "-separated), one per call; the last repeats.
	// Empty: every reference resolved.
	refs []string
	// apps names the function apps terraform lists (function_apps), each
	// at <name>.azurewebsites.net. Empty: one, func-ehmirror-prod-abc.
	apps []string
	// appStatus holds, per app name, answers of that app's /api/status
	// as status does (the last repeats); an app not here answers status.
	appStatus map[string][]string
	// existingApps: the state already lists the apps before this run's
	// apply (a later deployment); otherwise function_apps has no value
	// until the first apply, as on a fresh subscription.
	existingApps bool
	// restricted is the module's output restrict_public_network_access.
	restricted bool
	// uploadFailures: the first this many package uploads are refused
	// (the deployer's new role not yet effective).
	uploadFailures int
	// expiry holds the answers of "az account get-access-token --query
	// expires_on", one per call, the last repeating: "+N" (the login
	// expires N seconds from now) or "fail" (AADSTS700024). Empty: +3600.
	// "az login" (DEPLOY_AZ_LOGIN) makes every later answer +3600.
	expiry []string
}

// readyStatus is /api/status of an app that read Kafka and sent its drain.
const readyStatus = `200 {"ok":true,"lag":{"total":0},"last_drains":[{"run":"r1","records":3,"stopped":"caught-up"}]}`

// runDeploy copies scripts/deploy.sh into a scratch checkout (with a package
// and a tfvars file) and runs it with stdin from /dev/null, as a pipeline
// does, with env added to a minimal environment; the app is ready at once.
func runDeploy(t *testing.T, env []string, args ...string) deployRun {
	t.Helper()
	return runDeployScenario(t, deployScenario{}, env, args...)
}

// runDeployScenario is runDeploy with the app's answers from sc. The
// stand-in for curl records each call as "curl METHOD URL" and, for header
// files (-H @file), "curl-header NAME" (the header's name only).
func runDeployScenario(t *testing.T, sc deployScenario, env []string, args ...string) deployRun {
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
	if len(sc.status) == 0 {
		sc.status = []string{readyStatus}
	}
	if len(sc.refs) == 0 {
		sc.refs = []string{""}
	}
	if len(sc.apps) == 0 {
		sc.apps = []string{"func-ehmirror-prod-abc"}
	}
	if len(sc.expiry) == 0 {
		sc.expiry = []string{"+3600"}
	}
	var apps []string
	for _, a := range sc.apps {
		apps = append(apps, fmt.Sprintf(`{"name":%q,"default_hostname":"%s.azurewebsites.net"}`, a, a))
	}
	log := filepath.Join(root, "calls.log")
	files := map[string]string{
		"scripts/deploy.sh":             string(script),
		"dist/ehmirror-functionapp.zip": "PK",
		"infra/terraform.tfvars":        `location = "westeurope"`,
		"infra/backend.hcl":             `storage_account_name = "sttfstate"`,
		"status.seq":                    strings.Join(sc.status, "\n") + "\n",
		"refs.seq":                      strings.Join(sc.refs, "\n") + "\n",
		"function_apps.json":            "[" + strings.Join(apps, ",") + "]\n",
		"expiry.seq":                    strings.Join(sc.expiry, "\n") + "\n",
		"upload.failures":               fmt.Sprint(sc.uploadFailures),
		"restricted":                    fmt.Sprint(sc.restricted),
		// next FILE: the first line of FILE, removed unless it is the last.
		"bin/next": `#!/bin/sh
f=$1
head -n 1 "$f"
if [ "$(wc -l <"$f")" -gt 1 ]; then tail -n +2 "$f" >"$f.tmp" && mv "$f.tmp" "$f"; fi
`,
		"bin/az": `#!/bin/sh
echo "az $*" >>"` + log + `"
case "$*" in
"account show --query id -o tsv") echo 00000000-0000-0000-0000-000000000005 ;;
"account get-access-token --query expires_on -o tsv")
	e=$(next "` + filepath.Join(root, "expiry.seq") + `")
	if [ "$e" = fail ]; then echo "ERROR: AADSTS700024: Client assertion is not within its valid time range." >&2; exit 1; fi
	echo $(( $(date +%s) + ${e#+} )) ;;
"account get-access-token "*) echo tok-SECRET-0001 ;;
"login "*) echo "+3600" >"` + filepath.Join(root, "expiry.seq") + `" ;;
"storage blob upload "*)
	n=$(cat "` + filepath.Join(root, "upload.failures") + `")
	if [ "$n" -gt 0 ]; then echo $((n - 1)) >"` + filepath.Join(root, "upload.failures") + `"; echo "ERROR: This request is not authorized to perform this operation using this permission. AuthorizationPermissionMismatch" >&2; exit 1; fi ;;
"functionapp keys list "*) echo key-SECRET-0002 ;;
"rest "*) next "` + filepath.Join(root, "refs.seq") + `" | tr ' ' '\n' | grep . ;;
esac
exit 0
`,
		"bin/curl": `#!/bin/bash
out= fmt= method=GET url=
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift ;;
	-w) fmt=$2; shift ;;
	-X) method=$2; shift ;;
	-H) case $2 in @*) echo "curl-header $(cut -d: -f1 "${2#@}")" >>"` + log + `" ;; esac; shift ;;
	--data|--data-binary|--max-time) shift ;;
	-*) ;;
	*) url=$1 ;;
	esac
	shift
done
echo "curl $method $url" >>"` + log + `"
echo "$*" >>"` + log + `.argv"
code=200 body=
case $url in
*/api/status|*/api/status\?*)
	seq="` + root + `/status-$(echo "$url" | cut -d/ -f3 | cut -d. -f1).seq"
	[ -f "$seq" ] || seq="` + filepath.Join(root, "status.seq") + `"
	line=$(next "$seq"); code=${line%% *}; body=${line#* } ;;
*/api/catchup) code=202; body='{"id":"c1","started":true,"status_url":"https://x/api/status?run=c1"}' ;;
esac
if [ -n "$out" ]; then printf '%s' "$body" >"$out"; else printf '%s' "$body"; fi
if [ -n "$fmt" ]; then printf '%s' "$code"; fi
exit 0
`,
		"bin/terraform": `#!/bin/sh
echo "terraform $*" >>"` + log + `"
state="` + filepath.Join(root, "tfstate") + `"
case "$*" in
*" apply "*) touch "$state" ;;
*"output -raw resource_group_name") echo rg-ehmirror-prod ;;
*"output -raw restrict_public_network_access") cat "` + filepath.Join(root, "restricted") + `" ;;
*"output -json function_package") echo '{"storage_account_name":"stfehmirrorprod","container_name":"function-packages","blob_name":"ehmirror-functionapp.zip","url":"https://stfehmirrorprod.blob.core.windows.net/function-packages/ehmirror-functionapp.zip"}' ;;
*"output -json function_apps")
	[ -f "$state" ] || { echo "No outputs found" >&2; exit 1; }
	cat "` + filepath.Join(root, "function_apps.json") + `" ;;
esac
`,
	}
	if sc.existingApps {
		files["tfstate"] = "{}"
	}
	for app, answers := range sc.appStatus {
		files["status-"+app+".seq"] = strings.Join(answers, "\n") + "\n"
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "deploy.sh"))
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = append([]string{"PATH=" + filepath.Join(root, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + root, "DEPLOY_POLL_INTERVAL=0",
		"TF_BACKEND_CONFIG=" + filepath.Join(root, "infra", "backend.hcl")}, env...)
	cmd.Stdin = nil // /dev/null: no terminal
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	var calls []string
	if b, err := os.ReadFile(log); err == nil {
		calls = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	_, err = os.Stat(filepath.Join(root, "infra", "backend_override.tf"))
	argv, _ := os.ReadFile(log + ".argv")
	return deployRun{err: runErr, stdout: stdout.String(), stderr: stderr.String(), calls: calls, argv: string(argv), localOverride: err == nil}
}

// apply returns the arguments of the first terraform apply call, if any.
func (r deployRun) apply() ([]string, bool) {
	applies := r.applies()
	if len(applies) == 0 {
		return nil, false
	}
	return applies[0], true
}

// applies returns the arguments of every terraform apply call, in order.
func (r deployRun) applies() [][]string {
	var out [][]string
	for _, c := range r.calls {
		f := strings.Fields(c)
		if len(f) > 2 && f[0] == "terraform" && f[2] == "apply" {
			out = append(out, f[3:])
		}
	}
	return out
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
			if r.index(uploadCall) < 0 {
				t.Errorf("no package upload for the app Terraform created; calls: %q", r.calls)
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

const (
	enableTimer = "az functionapp config appsettings set --resource-group rg-ehmirror-prod --name func-ehmirror-prod-abc --settings AzureWebJobs.MirrorTimer.Disabled=false"
	statusCall  = "curl GET https://func-ehmirror-prod-abc.azurewebsites.net/api/status"
	catchUpCall = "curl POST https://func-ehmirror-prod-abc.azurewebsites.net/api/catchup"
	restartCall = "az functionapp restart --resource-group rg-ehmirror-prod --name func-ehmirror-prod-abc"
	uploadCall  = "az storage blob upload --auth-mode login --account-name stfehmirrorprod --container-name function-packages --name ehmirror-functionapp.zip"
)

// TestDeployUploadsThePackageWithEntraID (issue 24, item 8; issue 44, item
// 1): the apps have no content share and run the package from its blob
// (WEBSITE_RUN_FROM_PACKAGE, terraform output function_package), so the
// script uploads it there with the az login's Entra ID identity (no key,
// no publishing credentials, no zip deployment into the app's file system
// that an unmounted share or a restart could lose), after the last apply,
// then restarts the app to load it, before reading its status. A restart
// later (for Key Vault references) needs no new upload: the blob stays.
func TestDeployUploadsThePackageWithEntraID(t *testing.T) {
	r := runDeployScenario(t, deployScenario{
		refs:   []string{"KAFKA_SASL_PASSWORD", ""},
		status: []string{`503 {"ok":false,"reason":"settings: KAFKA_SASL_PASSWORD is not set"}`, readyStatus},
	}, []string{"CI=true"})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
	}
	apply := -1
	for i, c := range r.calls {
		if strings.HasPrefix(c, "terraform ") && strings.Contains(c, " apply ") {
			apply = i
		}
	}
	upload := r.index(uploadCall)
	if upload < 0 || upload < apply {
		t.Fatalf("want the package uploaded to its blob (%s) after the last apply; calls: %q", uploadCall, r.calls)
	}
	if n := r.count("az storage blob upload"); n != 1 {
		t.Errorf("%d uploads, want 1 (a restart does not lose a package in a blob); calls: %q", n, r.calls)
	}
	if first := r.index(restartCall); first < upload || first > r.index(statusCall) {
		t.Errorf("want a restart after the upload (to load the package) and before the first status; calls: %q", r.calls)
	}
	if n := r.count(restartCall); n != 2 {
		t.Errorf("%d restarts, want 2 (the package, then the unresolved reference); calls: %q", n, r.calls)
	}
	for _, c := range r.calls {
		if strings.Contains(c, "zipdeploy") || strings.Contains(c, "config-zip") || strings.Contains(c, "publishing-credentials") || strings.Contains(c, "publish-profile") || strings.Contains(c, "account-key") || strings.Contains(c, "connection-string") {
			t.Errorf("deploy uses a zip deployment, basic-auth publishing or a storage key: %q", c)
		}
	}
	if r.index(enableTimer) < 0 {
		t.Errorf("the timer was not enabled; calls: %q", r.calls)
	}
	for what, text := range map[string]string{"curl's arguments": r.argv, "stdout": r.stdout, "stderr": r.stderr} {
		if strings.Contains(text, "SECRET") {
			t.Errorf("a token or function key appears in %s: %q", what, text)
		}
	}
}

// TestDeployRetriesTheUploadWhileTheRoleIsNew (issue 44, items 1 and 5): the
// deployer's Storage Blob Data Contributor on the package container is
// created by the same apply and may take minutes to take effect: refused
// uploads are retried; past DEPLOY_UPLOAD_TIMEOUT the script stops with one
// line naming deployer_object_ids, before any timer is enabled.
func TestDeployRetriesTheUploadWhileTheRoleIsNew(t *testing.T) {
	r := runDeployScenario(t, deployScenario{uploadFailures: 2}, []string{"CI=true"})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
	}
	if n := r.count("az storage blob upload"); n != 3 {
		t.Errorf("%d uploads, want 3 (two refused, then accepted); calls: %q", n, r.calls)
	}
	if r.lastIndex("az storage blob upload") > r.index(restartCall) {
		t.Errorf("the app was restarted before its package was uploaded; calls: %q", r.calls)
	}

	r = runDeployScenario(t, deployScenario{uploadFailures: 1000}, []string{"CI=true", "DEPLOY_UPLOAD_TIMEOUT=2", "DEPLOY_POLL_INTERVAL=1"})
	if r.err == nil {
		t.Fatal("deploy succeeded although every upload was refused")
	}
	if r.index(restartCall) >= 0 || r.index(enableTimer) >= 0 {
		t.Errorf("the app was restarted or its timer enabled without a package; calls: %q", r.calls)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "deployer_object_ids") || !strings.Contains(r.stderr, "AuthorizationPermissionMismatch") {
		t.Errorf("stderr %q, want one line with the refusal and deployer_object_ids", r.stderr)
	}
}

// TestDeployClosesTheFirewallsInASecondStep (issue 44, item 3): a
// deployment that creates the apps applies once with the firewalls open
// (-var=network_firewall_open_for_create=true); in restricted mode a second
// apply, without it, closes them before the package is uploaded. A later
// deployment (the apps exist) applies once, closed.
func TestDeployClosesTheFirewallsInASecondStep(t *testing.T) {
	const open = "-var=network_firewall_open_for_create=true"
	r := runDeployScenario(t, deployScenario{restricted: true}, []string{"CI=true"}, "-var-file=prod.tfvars")
	if r.err != nil {
		t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
	}
	applies := r.applies()
	if len(applies) != 2 || !slices.Contains(applies[0], open) || slices.Contains(applies[1], open) || !slices.Contains(applies[1], "-var-file=prod.tfvars") {
		t.Fatalf("applies %q, want one with %s, then one without it (with the user's arguments)", applies, open)
	}
	second := r.lastIndex("terraform -chdir=")
	for i, c := range r.calls {
		if strings.Contains(c, " apply ") {
			second = i
		}
	}
	if r.index(uploadCall) < second {
		t.Errorf("the package was uploaded before the firewalls were closed; calls: %q", r.calls)
	}

	r = runDeployScenario(t, deployScenario{restricted: false}, []string{"CI=true"})
	if applies := r.applies(); r.err != nil || len(applies) != 1 || !slices.Contains(applies[0], open) {
		t.Errorf("not restricted: applies %q (err %v), want one (the open firewall is the configured one)", applies, r.err)
	}

	r = runDeployScenario(t, deployScenario{restricted: true, existingApps: true}, []string{"CI=true"})
	if applies := r.applies(); r.err != nil || len(applies) != 1 || slices.Contains(applies[0], open) {
		t.Errorf("existing apps: applies %q (err %v), want one, firewalls closed", applies, r.err)
	}
}

// TestDeployLogsInAgainBeforeTheTokenExpires (issue 44, item 7): a pipeline's
// federated az login cannot be renewed and the readiness wait can outlive
// it (AADSTS700024). Before the upload and each readiness round the script
// checks the login: about to expire, it runs DEPLOY_AZ_LOGIN and goes on;
// without DEPLOY_AZ_LOGIN an expired login stops it with one line naming
// AADSTS700024 and DEPLOY_AZ_LOGIN, the timer still disabled. A login that
// merely nears its end without DEPLOY_AZ_LOGIN (a person's, which az
// renews) is not an error.
func TestDeployLogsInAgainBeforeTheTokenExpires(t *testing.T) {
	notReady := `200 {"ok":false,"reason":"unauthorized: sending to event hub prod.test1","last_drains":[]}`
	relogin := "DEPLOY_AZ_LOGIN=az login --service-principal --federated-token from-the-runner"
	r := runDeployScenario(t, deployScenario{
		expiry: []string{"+3600", "+3600", "+60"},
		status: []string{notReady, notReady, readyStatus},
	}, []string{"CI=true", relogin})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
	}
	login := r.index("az login --service-principal")
	if login < 0 || r.count("az login") != 1 || login > r.index(enableTimer) {
		t.Errorf("want one az login (DEPLOY_AZ_LOGIN) when the token nears its end, before the timer is enabled; calls: %q", r.calls)
	}

	r = runDeployScenario(t, deployScenario{
		expiry: []string{"+3600", "+3600", "fail"},
		status: []string{notReady},
	}, []string{"CI=true"})
	if r.err == nil {
		t.Fatalf("deploy succeeded with an expired login; calls: %q", r.calls)
	}
	if r.index("az functionapp config appsettings set") >= 0 {
		t.Errorf("the timer was enabled; calls: %q", r.calls)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "AADSTS700024") || !strings.Contains(r.stderr, "DEPLOY_AZ_LOGIN") {
		t.Errorf("stderr %q, want one line naming AADSTS700024 and DEPLOY_AZ_LOGIN", r.stderr)
	}

	r = runDeployScenario(t, deployScenario{expiry: []string{"+60"}}, []string{"CI=true"})
	if r.err != nil || r.index(enableTimer) < 0 {
		t.Errorf("a login that nears its end without DEPLOY_AZ_LOGIN must not stop the deployment: %v\n%s", r.err, r.stderr)
	}
}

// TestDeployEnablesTheTimerWhenReady (issue 24, item 3): the timer stays
// disabled until the app resolves its Key Vault references (restarted once
// when they were not), reads Kafka (status 200) and, after a catch-up
// retried the send that was unauthorized, reports ok with a drain; only
// then is AzureWebJobs.MirrorTimer.Disabled set to false, and the status
// is printed.
func TestDeployEnablesTheTimerWhenReady(t *testing.T) {
	r := runDeployScenario(t, deployScenario{
		refs: []string{"KAFKA_SASL_USERNAME KAFKA_SASL_PASSWORD", ""},
		status: []string{
			`503 {"ok":false,"reason":"settings: KAFKA_SASL_PASSWORD is not set","problems":[]}`,
			`200 {"ok":false,"reason":"unauthorized: sending to event hub prod.test1","lag":{"total":7},"last_drains":[{"run":"c0","records":0,"stopped":"error"}]}`,
			`200 {"ok":true,"lag":{"total":7}}`,
			readyStatus,
		},
	}, []string{"CI=true"})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	if n := r.count(restartCall); n != 2 {
		t.Errorf("app restarted %d times, want 2 (to load the package, then once for the unresolved Key Vault references); calls: %q", n, r.calls)
	}
	if !strings.Contains(r.stdout, "KAFKA_SASL_PASSWORD") {
		t.Errorf("stdout does not name the unresolved reference:\n%s", r.stdout)
	}
	enable := r.index(enableTimer)
	if enable < 0 {
		t.Fatalf("the timer was not enabled; calls: %q", r.calls)
	}
	if r.count(statusCall) != 4 || r.lastIndex(statusCall) > enable {
		t.Errorf("the timer must be enabled after the 4th status (the first ok with a drain); calls: %q", r.calls)
	}
	if n := r.count(catchUpCall); n != 2 {
		t.Errorf("%d catch-ups, want 2 (after the unauthorized status and after ok without a drain); calls: %q", n, r.calls)
	}
	if r.lastIndex(restartCall) > r.index(statusCall) {
		t.Errorf("restart must come before the status is read; calls: %q", r.calls)
	}
	if !strings.Contains(r.stdout, "unauthorized: sending to event hub prod.test1") || !strings.Contains(r.stdout, `"ok": true`) {
		t.Errorf("stdout must show why the app was not ready, then the final status:\n%s", r.stdout)
	}
}

// TestDeployWaitsForItsCatchUpOnAnyInstance (issue 49, item 5): the
// readiness catch-up's status is polled by its run id, which every instance
// answers; a drain reported while the catch-up still runs does not enable
// the timer (the setting change restarts the app and would kill the
// catch-up), and no second catch-up starts while the first runs; the run
// caught up, reported by an instance other than the one that ran it,
// enables it.
func TestDeployWaitsForItsCatchUpOnAnyInstance(t *testing.T) {
	r := runDeployScenario(t, deployScenario{
		status: []string{
			`200 {"ok":true,"lag":{"total":7},"last_drains":[]}`,
			`200 {"ok":true,"lag":{"total":3},"catch_up":{"id":"c1","state":"running"},"run":{"id":"c1","state":"running"},"last_drains":[{"run":"catch-up c1","records":4,"stopped":"caught up"}]}`,
			`200 {"ok":true,"lag":{"total":0},"run":{"id":"c1","state":"caught up"},"run_instance":"other","last_drains":[]}`,
		},
	}, []string{"CI=true"})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	enable := r.index(enableTimer)
	if enable < 0 {
		t.Fatalf("the timer was not enabled; calls: %q", r.calls)
	}
	if n := r.count(statusCall); n != 3 || r.lastIndex(statusCall) > enable {
		t.Errorf("%d status reads; want the timer enabled after the 3rd (the run caught up); calls: %q", n, r.calls)
	}
	if n := r.count(statusCall + "?run=c1"); n != 2 {
		t.Errorf("%d status reads by the catch-up's run id, want 2; calls: %q", n, r.calls)
	}
	if n := r.count(catchUpCall); n != 1 {
		t.Errorf("%d catch-ups, want 1 (none while it runs); calls: %q", n, r.calls)
	}
}

// TestDeployLeavesTheTimerDisabledWhenNotReady (issue 24, item 3): when the
// app does not become ready in DEPLOY_READY_TIMEOUT the timer stays
// disabled and the script fails with one line naming the reason; the app
// is restarted for unresolved references at most once per
// DEPLOY_RESTART_INTERVAL.
func TestDeployLeavesTheTimerDisabledWhenNotReady(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		sc           deployScenario
		restarts     int
	}{
		{"unauthorized", "unauthorized: sending to event hub prod.test2",
			deployScenario{status: []string{`200 {"ok":false,"reason":"unauthorized: sending to event hub prod.test2","last_drains":[]}`}}, 1},
		{"key vault", "Key Vault references not resolved: KAFKA_SASL_PASSWORD",
			deployScenario{refs: []string{"KAFKA_SASL_PASSWORD"}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runDeployScenario(t, tc.sc, []string{"CI=true", "DEPLOY_READY_TIMEOUT=3", "DEPLOY_POLL_INTERVAL=1", "DEPLOY_RESTART_INTERVAL=300"})
			if r.err == nil {
				t.Fatalf("deploy succeeded although the app never became ready; calls: %q", r.calls)
			}
			if r.index(enableTimer) >= 0 || r.index("az functionapp config appsettings set") >= 0 {
				t.Errorf("the timer was enabled; calls: %q", r.calls)
			}
			if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, tc.reason) || !strings.Contains(r.stderr, "AzureWebJobs.MirrorTimer.Disabled=true") {
				t.Errorf("stderr %q, want one line naming %q and the disabled timer", r.stderr, tc.reason)
			}
			if n := r.count(restartCall); n != tc.restarts {
				t.Errorf("%d restarts, want %d (one to load the package, plus those for references); calls: %q", n, tc.restarts, r.calls)
			}
		})
	}
}

// TestDeployPassesTheStateBackend (issue 24, item 5): a pipeline keeps its
// state in the azurerm backend: --backend-config (repeatable) and
// TF_BACKEND_CONFIG reach terraform init; without any backend
// configuration the script stops before terraform with one line, unless
// --local-state asks for a state on this machine (an override file).
func TestDeployPassesTheStateBackend(t *testing.T) {
	r := runDeploy(t, []string{"CI=true", "TF_BACKEND_CONFIG=/ci/backend.hcl"}, "--backend-config=key=prod.tfstate", "-var-file=prod.tfvars")
	if r.err != nil {
		t.Fatalf("deploy failed: %v\n%s", r.err, r.stderr)
	}
	init, ok := r.init()
	if !ok || !slices.Contains(init, "-backend-config=key=prod.tfstate") || !slices.Contains(init, "-backend-config=/ci/backend.hcl") {
		t.Errorf("init arguments %q, want both backend configurations; calls: %q", init, r.calls)
	}
	if apply, _ := r.apply(); slices.ContainsFunc(apply, func(a string) bool { return strings.Contains(a, "backend-config") }) || !slices.Contains(apply, "-var-file=prod.tfvars") {
		t.Errorf("apply arguments %q: want -var-file and no backend configuration", apply)
	}
	if r.localOverride {
		t.Error("a run with a backend configuration wrote infra/backend_override.tf")
	}

	r = runDeploy(t, []string{"CI=true", "TF_BACKEND_CONFIG="})
	if r.err == nil {
		t.Fatal("deploy without a backend configuration succeeded")
	}
	if _, ok := r.init(); ok {
		t.Errorf("terraform init ran without a backend configuration: %q", r.calls)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "--backend-config") || !strings.Contains(r.stderr, "--local-state") {
		t.Errorf("stderr %q, want one line naming --backend-config and --local-state", r.stderr)
	}

	r = runDeploy(t, []string{"CI=true", "TF_BACKEND_CONFIG="}, "--local-state")
	if r.err != nil {
		t.Fatalf("deploy --local-state failed: %v\n%s", r.err, r.stderr)
	}
	if init, ok := r.init(); !ok || slices.ContainsFunc(init, func(a string) bool { return strings.Contains(a, "backend-config") }) || !r.localOverride {
		t.Errorf("--local-state: init %q, override file written %v", init, r.localOverride)
	}
}

// TestDeployDeploysEveryInstance (issue 25, item 4): with instances = N the
// module lists N apps in output function_apps; the script uploads the one
// package they all run, restarts each to load it, and enables each app's
// timer only once that app's own
// /api/status is ok with a drain. An app that never gets ready keeps its
// timer disabled and the script fails naming it, while the ready one's
// timer is on.
func TestDeployDeploysEveryInstance(t *testing.T) {
	apps := []string{"func-ehmirror-prod-abc", "func-ehmirror-prod-abc-2", "func-ehmirror-prod-abc-3"}
	enable := func(app string) string {
		return "az functionapp config appsettings set --resource-group rg-ehmirror-prod --name " + app + " --settings AzureWebJobs.MirrorTimer.Disabled=false"
	}
	status := func(app string) string { return "curl GET https://" + app + ".azurewebsites.net/api/status" }

	r := runDeployScenario(t, deployScenario{
		apps: apps,
		appStatus: map[string][]string{
			// The second app's sends are unauthorized twice before its drain.
			apps[1]: {
				`200 {"ok":false,"reason":"unauthorized: sending to event hub prod.test1","last_drains":[]}`,
				`200 {"ok":false,"reason":"unauthorized: sending to event hub prod.test1","last_drains":[]}`,
				readyStatus,
			},
		},
	}, []string{"CI=true"})
	if r.err != nil {
		t.Fatalf("deploy failed: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	for _, app := range apps {
		zip := r.index("az functionapp restart --resource-group rg-ehmirror-prod --name " + app)
		on := r.index(enable(app))
		if zip < 0 || zip < r.index(uploadCall) || on < 0 {
			t.Errorf("%s: restart after the upload at %d, timer enabled at %d; calls: %q", app, zip, on, r.calls)
			continue
		}
		if last := r.lastIndex(status(app)); last < zip || last > on {
			t.Errorf("%s: the timer must be enabled after the app's last status (the ready one); calls: %q", app, r.calls)
		}
		if n := r.count(enable(app)); n != 1 {
			t.Errorf("%s: timer enabled %d times, want 1", app, n)
		}
	}
	if n := r.count(status(apps[1])); n != 3 {
		t.Errorf("%s: %d status reads, want 3 (ready at the third); calls: %q", apps[1], n, r.calls)
	}
	if n := r.count(status(apps[0])); n != 1 {
		t.Errorf("%s: %d status reads, want 1 (ready at once)", apps[0], n)
	}
	if r.index(enable(apps[0])) > r.index(enable(apps[1])) || r.index(enable(apps[2])) > r.index(enable(apps[1])) {
		t.Errorf("the ready apps' timers must not wait for the slow one; calls: %q", r.calls)
	}
	if n := r.count("az storage blob upload"); n != 1 {
		t.Errorf("%d package uploads, want 1 (every app runs the one blob)", n)
	}

	r = runDeployScenario(t, deployScenario{
		apps: apps[:2],
		appStatus: map[string][]string{
			apps[1]: {`200 {"ok":false,"reason":"unauthorized: sending to event hub prod.test4","last_drains":[]}`},
		},
	}, []string{"CI=true", "DEPLOY_READY_TIMEOUT=2", "DEPLOY_POLL_INTERVAL=1"})
	if r.err == nil {
		t.Fatalf("deploy succeeded although %s never became ready", apps[1])
	}
	if r.index(enable(apps[0])) < 0 || r.index(enable(apps[1])) >= 0 {
		t.Errorf("want the ready app's timer enabled and the other's left disabled; calls: %q", r.calls)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, apps[1]+": unauthorized: sending to event hub prod.test4") || strings.Contains(r.stderr, apps[0]+":") {
		t.Errorf("stderr %q, want one line naming only %s and its reason", r.stderr, apps[1])
	}
}
