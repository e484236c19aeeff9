package faults

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ehmirror/ehmirror/config"
)

// notWrittenByTerraform are the handler's settings that infra/ deliberately
// neither writes nor lets additional_app_settings pass, each with the
// reason (infra/README.md, "App settings", says the same).
var notWrittenByTerraform = map[string]string{
	config.EventHubsConnection: "a namespace connection string (a key): the module uses the app's identity, EVENTHUBS__fullyQualifiedNamespace, and turns the namespace's keys off",
}

// tfSettings is what infra/ does with app settings: the names its function
// app's app_settings write (keys of the expression and of the locals and
// Key Vault secrets it draws on), the names written from a Key Vault secret,
// and the names additional_app_settings lets through.
type tfSettings struct {
	written   map[string]bool
	fromVault map[string]bool
	accepts   func(name string) bool
	// source is what the settings are made of: the app_settings expression
	// with the locals and for_each it draws on, and the bodies (values) of
	// the Key Vault secrets.
	source string
}

// readTFSettings evaluates, from the source, what the module's function app
// writes into app_settings and what its additional_app_settings accepts.
// Anything it cannot read is an error: a setting the test could not see is
// a setting it could not check.
func readTFSettings(root *hclBody) (tfSettings, error) {
	apps := root.blocks("resource", "azurerm_linux_function_app")
	if len(apps) != 1 {
		return tfSettings{}, fmt.Errorf("%d azurerm_linux_function_app resources, want 1", len(apps))
	}
	expr, ok := apps[0].Body.Attrs["app_settings"]
	if !ok {
		return tfSettings{}, fmt.Errorf("the function app has no app_settings")
	}
	s := tfSettings{source: settingsSource(root, expr), fromVault: map[string]bool{}}
	s.written = settingKeys(s.source)
	for _, kv := range root.blocks("resource", "azurerm_key_vault_secret") {
		s.source += bodyText(kv.Body)
		if each, ok := kv.Body.Attrs["for_each"]; ok {
			for name := range settingKeys(settingsSource(root, each)) {
				s.fromVault[name] = true
			}
		}
	}
	var err error
	s.accepts, err = additionalSettingsRule(root)
	return s, err
}

// infraSettings reads infra/*.tf and what its app settings do.
func infraSettings(t *testing.T) (*hclBody, tfSettings) {
	t.Helper()
	root, err := parseHCLDir("../infra")
	if err != nil {
		t.Fatal(err)
	}
	s, err := readTFSettings(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, s
}

// settingsSource returns expr with, transitively, the expressions of the
// locals it names and the for_each of the resources it names (the Key Vault
// secrets whose references become settings), without # comments.
func settingsSource(root *hclBody, expr string) string {
	defs := map[string]string{}
	for _, bl := range root.Blocks {
		switch {
		case bl.Type == "locals":
			for name, e := range bl.Body.Attrs {
				defs["local."+name] = e
			}
		case bl.Type == "resource" && len(bl.Labels) == 2:
			defs[bl.Labels[0]+"."+bl.Labels[1]] = bl.Body.Attrs["for_each"]
		}
	}
	var sb strings.Builder
	seen := map[string]bool{}
	queue := []string{expr}
	for len(queue) > 0 {
		text := tfComment.ReplaceAllString(queue[0], "")
		queue = queue[1:]
		sb.WriteString(text)
		sb.WriteByte('\n')
		for _, ref := range tfRef.FindAllString(text, -1) {
			if e, ok := defs[ref]; ok && !seen[ref] && e != "" {
				seen[ref] = true
				queue = append(queue, e)
			}
		}
	}
	return sb.String()
}

// settingKey matches an object key that looks like an app setting name: a
// letter, then letters, digits, '_' or '.', before '=' (not '==' or '=>').
var settingKey = regexp.MustCompile(`(?m)(?:^|[\s{(,])"?([A-Za-z][A-Za-z0-9_.]*)"?\s*=(?:[^=>]|$)`)

// settingKeys returns the object keys of src.
func settingKeys(src string) map[string]bool {
	out := map[string]bool{}
	for _, m := range settingKey.FindAllStringSubmatch(src, -1) {
		out[m[1]] = true
	}
	return out
}

// additionalSettingsRule reads the validation of additional_app_settings —
// a regex of refused prefixes and a list of refused names — and returns
// whether it lets a name through.
func additionalSettingsRule(root *hclBody) (func(string) bool, error) {
	vars := root.blocks("variable", "additional_app_settings")
	if len(vars) != 1 {
		return nil, fmt.Errorf("%d additional_app_settings variables, want 1", len(vars))
	}
	vals := vars[0].Body.blocks("validation")
	if len(vals) != 1 {
		return nil, fmt.Errorf("additional_app_settings has %d validations, want 1 the test can read", len(vals))
	}
	cond := vals[0].Body.Attrs["condition"]
	re := regexp.MustCompile(`!can\(regex\(("(?:[^"\\]|\\.)*"), k\)\)`).FindStringSubmatch(cond)
	list := regexp.MustCompile(`!contains\(\[([^\]]*)\], k\)`).FindStringSubmatch(cond)
	if re == nil || list == nil {
		return nil, fmt.Errorf("additional_app_settings' condition is not !can(regex(\"…\", k)) && !contains([…], k): %s", cond)
	}
	pattern, err := strconv.Unquote(re[1])
	if err != nil {
		return nil, fmt.Errorf("additional_app_settings' regex %s: %w", re[1], err)
	}
	refusedPrefix, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("additional_app_settings' regex: %w", err)
	}
	var refused []string
	for _, q := range strings.Split(list[1], ",") {
		name, ok := unquote(q)
		if !ok {
			return nil, fmt.Errorf("additional_app_settings refuses %q, not a literal", q)
		}
		refused = append(refused, name)
	}
	return func(name string) bool {
		return !refusedPrefix.MatchString(name) && !slices.Contains(refused, name)
	}, nil
}

// secretSettings returns the settings config treats as secrets: those whose
// values config.Secrets keeps out of output.
func secretSettings() map[string]bool {
	value := func(name string) string { return "value of " + name }
	out := map[string]bool{}
	secrets := config.Secrets(value)
	for _, name := range config.Names() {
		if slices.Contains(secrets, value(name)) {
			out[name] = true
		}
	}
	return out
}

// settingsGaps returns one line for each handler setting that s can neither
// write nor accept, for each secret that does not come from Key Vault or
// that additional_app_settings would take in plain text, and for each
// setting the module writes that additional_app_settings also takes (the
// module's value would silently win).
func settingsGaps(s tfSettings, names []string, secrets map[string]bool, exempt map[string]string) []string {
	var gaps []string
	for _, name := range names {
		if reason, ok := exempt[name]; ok {
			if s.written[name] || s.accepts(name) {
				gaps = append(gaps, fmt.Sprintf("%s: deliberately not written (%s), but the module writes or accepts it", name, reason))
			}
			continue
		}
		switch {
		case s.written[name] && s.accepts(name):
			gaps = append(gaps, fmt.Sprintf("%s: written by the module and accepted by additional_app_settings, whose value the module's silently replaces; refuse it there", name))
		case secrets[name] && s.accepts(name):
			gaps = append(gaps, fmt.Sprintf("%s: a secret that additional_app_settings takes in plain text; write it as a Key Vault reference", name))
		case secrets[name] && !s.fromVault[name]:
			gaps = append(gaps, fmt.Sprintf("%s: a secret not written from a Key Vault secret (azurerm_key_vault_secret for_each)", name))
		case !s.written[name] && !s.accepts(name):
			gaps = append(gaps, fmt.Sprintf("%s: the module neither writes it nor lets additional_app_settings pass it; add a variable (infra/, docs/settings.md)", name))
		}
	}
	return gaps
}

// TestTerraformWritesEverySetting reads infra/*.tf and checks that every
// setting the handler reads (config.Names) can be set on a deployed app:
// the function app's app_settings write it (from a typed variable, or as a
// Key Vault reference for a secret) or additional_app_settings lets it
// through; a setting the module writes is refused in
// additional_app_settings; a secret is never plain text. The only
// exceptions are notWrittenByTerraform's, with their reasons. A new
// setting fails here until infra/ wires it.
func TestTerraformWritesEverySetting(t *testing.T) {
	_, s := infraSettings(t)
	names := config.Names()
	for _, gap := range settingsGaps(s, names, secretSettings(), notWrittenByTerraform) {
		t.Error(gap)
	}
	var written []string
	for _, name := range names {
		if s.written[name] {
			written = append(written, name)
		}
	}
	t.Logf("infra/ writes %d of the handler's %d settings; not written: %v", len(written), len(names), slices.DeleteFunc(slices.Clone(names), func(n string) bool { return s.written[n] }))
}

// TestTerraformSettingsCheckerSeesGaps keeps the checker honest: on a small
// module that writes one setting, takes one secret from Key Vault and lets
// additional_app_settings pass anything but KAFKA_* and one name, it must
// report the setting that is neither written nor accepted, the written one
// that additional_app_settings also takes, and the secret that would pass
// in plain text.
func TestTerraformSettingsCheckerSeesGaps(t *testing.T) {
	src := `
variable "additional_app_settings" {
  type = map(string)
  validation {
    condition     = alltrue([for k in keys(var.additional_app_settings) : !can(regex("^(KAFKA_|EVENTHUBS$)", k)) && !contains(["FUNCTIONS_WORKER_RUNTIME"], k)])
    error_message = "no"
  }
}

locals {
  secret_names = { KAFKA_SASL_PASSWORD = "kafka-sasl-password" } # KAFKA_GROUP = "x" is a comment
  handler = merge({
    KAFKA_BROKERS   = join(",", var.kafka_brokers)
    MIRROR_SCHEDULE = var.mirror_schedule == "" ? "x" : var.mirror_schedule
  }, { for s, secret in azurerm_key_vault_secret.kafka : s => secret.versionless_id })
}

resource "azurerm_key_vault_secret" "kafka" {
  for_each = local.secret_names
  value_wo = lookup({ KAFKA_TLS_KEY_PEM = var.key }, each.key)
}

resource "azurerm_linux_function_app" "this" {
  app_settings = merge(var.additional_app_settings, local.handler)
}
`
	root, err := parseHCL(src, false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := readTFSettings(root)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"KAFKA_BROKERS", "KAFKA_SASL_PASSWORD", "KAFKA_GROUP", "KAFKA_TLS_KEY_PEM", "MIRROR_SCHEDULE", "CUTOVER_STORAGE", "CUTOVER_CONTAINER", "EVENTHUBS"}
	secrets := map[string]bool{"KAFKA_SASL_PASSWORD": true, "KAFKA_TLS_KEY_PEM": true, "CUTOVER_STORAGE": true}
	got := settingsGaps(s, names, secrets, map[string]string{"EVENTHUBS": "a key"})
	for i, g := range got {
		got[i], _, _ = strings.Cut(g, ":")
	}
	want := []string{"KAFKA_GROUP", "KAFKA_TLS_KEY_PEM", "MIRROR_SCHEDULE", "CUTOVER_STORAGE"}
	if !slices.Equal(got, want) {
		t.Errorf("gaps %q, want %q", got, want)
	}
}

// TestSettingsDocsNameTerraformVariables checks the Terraform column of
// docs/settings.md and docs/cutover.md: every setting of config.Names has
// a row there, and each variable a row names is a variable of infra/ that
// the app settings read, for a setting the module writes.
func TestSettingsDocsNameTerraformVariables(t *testing.T) {
	root, s := infraSettings(t)
	rows := map[string]string{}
	for _, page := range []string{"../docs/settings.md", "../docs/cutover.md"} {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		column := -1
		for _, line := range strings.Split(string(text), "\n") {
			if !strings.HasPrefix(line, "|") {
				column = -1
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if i := slices.Index(cells, "Terraform (`infra/`)"); i >= 0 {
				column = i
				continue
			}
			name, ok := strings.CutPrefix(cells[0], "`")
			if column < 0 || !ok || column >= len(cells) {
				continue
			}
			rows[strings.TrimSuffix(name, "`")] = cells[column]
		}
	}
	variable := regexp.MustCompile("`([a-z][a-z0-9_]+)`")
	moduleDefault := regexp.MustCompile(`module default [^)]*`)
	for _, name := range config.Names() {
		cell, ok := rows[name]
		if !ok {
			t.Errorf("%s has no row with a Terraform column in docs/settings.md or docs/cutover.md", name)
			continue
		}
		vars := variable.FindAllStringSubmatch(moduleDefault.ReplaceAllString(cell, ""), -1)
		if s.written[name] && len(vars) == 0 && !strings.HasPrefix(cell, "set by the module") {
			t.Errorf("%s: the docs name no variable (%q), but the module writes it", name, cell)
		}
		for _, v := range vars {
			if len(root.blocks("variable", v[1])) != 1 {
				t.Errorf("%s: the docs name `%s`, which is not a variable of infra/", name, v[1])
			} else if !strings.Contains(s.source, "var."+v[1]) {
				t.Errorf("%s: the docs name `%s`, which the app settings do not read", name, v[1])
			}
		}
	}
}

// TestTerraformDurationsAreTheHandlers checks that every duration the
// module's validations accept (local.go_duration and a non-zero digit, or
// exactly "0" for MIRROR_MAX_PAUSE_AGE) is one the handler's config.Load
// accepts too, on the real loader: a plan that passes never deploys a
// setting the handler reports as invalid. The module may be stricter.
func TestTerraformDurationsAreTheHandlers(t *testing.T) {
	root, _ := infraSettings(t)
	var pattern string
	for _, l := range root.blocks("locals") {
		if e, ok := l.Body.Attrs["go_duration"]; ok {
			p, err := strconv.Unquote(e)
			if err != nil {
				t.Fatalf("local.go_duration %s: %v", e, err)
			}
			pattern = p
		}
	}
	if pattern == "" {
		t.Fatal("infra/ has no local.go_duration")
	}
	duration := regexp.MustCompile(pattern)
	nonZero := regexp.MustCompile(`[1-9]`)
	samples := []string{"2m", "90s", "1h30m", "0.5s", "1ms", "1us", "1µs", "1.5h", "10m0s", "0s", "0", "00m", "120", "-1m", "+1m", ".5s", "1e3s", "1 m", "1M", "2d"}
	accepted := 0
	for _, setting := range []string{config.MirrorMaxDuration, config.MirrorCatchUpDuration, config.MirrorMaxBacklogAge, config.MirrorMaxPauseAge} {
		for _, v := range samples {
			tfOK := duration.MatchString(v) && nonZero.MatchString(v) || (setting == config.MirrorMaxPauseAge && v == "0")
			env := map[string]string{setting: v}
			_, problems := config.Load(func(k string) string { return env[k] })
			handlerOK := !slices.ContainsFunc(problems, func(p config.Problem) bool { return p.Setting == setting })
			if tfOK && !handlerOK {
				t.Errorf("%s=%q: the module's validation accepts it, the handler does not", setting, v)
			}
			if tfOK {
				accepted++
			}
		}
	}
	if accepted == 0 {
		t.Fatal("the module's validation accepted no sample")
	}
}
