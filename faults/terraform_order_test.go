package faults

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// tfGraph is the reference graph of a Terraform module read from its source:
// an edge from each resource, data source or local to everything its
// arguments, nested blocks and depends_on name. Terraform orders creation
// along exactly these references, so a path A →* B means B is created
// (completely) before A.
type tfGraph struct {
	edges map[string][]string
	nodes map[string]*hclBlock // resources and data sources by address
}

var tfComment = regexp.MustCompile(`(?m)#.*$`)

var tfRef = regexp.MustCompile(`\b(data\.[a-z0-9_]+\.[A-Za-z0-9_-]+|local\.[A-Za-z0-9_]+|var\.[A-Za-z0-9_]+|(?:azurerm|time)_[a-z0-9_]+\.[A-Za-z0-9_-]+)`)

// bodyText returns every expression of a body and its nested blocks, without
// # comments.
func bodyText(b *hclBody) string {
	var sb strings.Builder
	for _, name := range sortedKeys(b.Attrs) {
		sb.WriteString(tfComment.ReplaceAllString(b.Attrs[name], ""))
		sb.WriteByte('\n')
	}
	for _, bl := range b.Blocks {
		sb.WriteString(bodyText(bl.Body))
	}
	return sb.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func newTFGraph(root *hclBody) *tfGraph {
	g := &tfGraph{edges: map[string][]string{}, nodes: map[string]*hclBlock{}}
	add := func(from, text string) {
		for _, m := range tfRef.FindAllString(text, -1) {
			if !slices.Contains(g.edges[from], m) && m != from {
				g.edges[from] = append(g.edges[from], m)
			}
		}
	}
	for _, bl := range root.Blocks {
		switch {
		case bl.Type == "resource" && len(bl.Labels) == 2:
			addr := bl.Labels[0] + "." + bl.Labels[1]
			g.nodes[addr] = bl
			add(addr, bodyText(bl.Body))
		case bl.Type == "data" && len(bl.Labels) == 2:
			addr := "data." + bl.Labels[0] + "." + bl.Labels[1]
			g.nodes[addr] = bl
			add(addr, bodyText(bl.Body))
		case bl.Type == "locals":
			for name, expr := range bl.Body.Attrs {
				add("local."+name, expr)
			}
		}
	}
	return g
}

// path returns a chain of references from → … → to, or nil.
func (g *tfGraph) path(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n == to {
			var out []string
			for ; n != ""; n = prev[n] {
				out = append([]string{n}, out...)
			}
			return out
		}
		for _, m := range g.edges[n] {
			if _, seen := prev[m]; !seen {
				prev[m] = n
				queue = append(queue, m)
			}
		}
	}
	return nil
}

// waitBetween returns the time_sleep resources that lie on a path from user
// to role: user waits for them, and they wait for role.
func (g *tfGraph) waitBetween(user, role string) []string {
	var out []string
	for addr := range g.nodes {
		if strings.HasPrefix(addr, "time_sleep.") && g.path(user, addr) != nil && g.path(addr, role) != nil {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return out
}

// checkRolePropagation reports, for each use of a role, whether the module
// makes it wait (a time_sleep of at least min, by the variable's default)
// between the role assignment and its use.
func checkRolePropagation(root *hclBody, min time.Duration) []string {
	g := newTFGraph(root)
	type use struct{ user, role, why string }
	uses := []use{
		{"azurerm_key_vault_secret.kafka", "azurerm_role_assignment.deployer_key_vault_secrets", "the deployer writes the Kafka secrets with Key Vault Secrets Officer"},
		{"azurerm_eventhub.this", "azurerm_role_assignment.namespace_capture_blob", "enabling Capture checks the namespace identity's Storage Blob Data Contributor"},
		{"azurerm_eventhub.this", "azurerm_role_assignment.deployer_capture_blob", "enabling Capture checks the deployer's Storage Blob Data Contributor"},
		{"azurerm_linux_function_app.this", "azurerm_role_assignment.function_app", "the app resolves its Key Vault references on its first start"},
	}
	// Every other secret the module writes (e.g. client certificates) waits
	// for the deployer's role too.
	for addr := range g.nodes {
		if strings.HasPrefix(addr, "azurerm_key_vault_secret.") && addr != uses[0].user {
			uses = append(uses, use{addr, uses[0].role, "the deployer writes it with Key Vault Secrets Officer"})
		}
	}
	var problems []string
	for _, u := range uses {
		if g.nodes[u.user] == nil || g.nodes[u.role] == nil {
			problems = append(problems, fmt.Sprintf("%s or %s is not in the module", u.user, u.role))
			continue
		}
		waits := g.waitBetween(u.user, u.role)
		if len(waits) == 0 {
			problems = append(problems, fmt.Sprintf("%s does not wait for %s to propagate (%s); reference path: %v", u.user, u.role, u.why, g.path(u.user, u.role)))
			continue
		}
		for _, w := range waits {
			d, err := sleepDuration(root, g.nodes[w])
			if err != nil || d < min {
				problems = append(problems, fmt.Sprintf("%s (between %s and %s) waits %v, want at least %v (%v)", w, u.user, u.role, d, min, err))
			}
		}
	}
	return problems
}

// sleepDuration is a time_sleep's create_duration: a literal, or a
// variable's default.
func sleepDuration(root *hclBody, bl *hclBlock) (time.Duration, error) {
	expr := bl.Body.Attrs["create_duration"]
	if name, ok := strings.CutPrefix(expr, "var."); ok {
		vars := root.blocks("variable", name)
		if len(vars) != 1 {
			return 0, fmt.Errorf("variable %s not found", name)
		}
		expr = vars[0].Body.Attrs["default"]
	}
	s, ok := unquote(expr)
	if !ok {
		return 0, fmt.Errorf("create_duration %q is not a literal or a variable with a default", expr)
	}
	return time.ParseDuration(s)
}

// TestTerraformRolesPropagateBeforeUse (issue 14, defects 1 and 2): Azure RBAC
// is eventually consistent and the provider does not retry a 403, so every
// first use of a role the module creates must wait for it: the Kafka
// secrets for the deployer's Key Vault Secrets Officer, Capture for both
// Storage Blob Data Contributor assignments, and the function app (whose
// Key Vault references resolve on its first start) for its identity's roles.
// The wait is a time_sleep on the reference path between the assignment
// and its use.
func TestTerraformRolesPropagateBeforeUse(t *testing.T) {
	root, err := parseHCLDir("../infra")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkRolePropagation(root, 30*time.Second) {
		t.Error(p)
	}
}

// TestTerraformOrderCheckerSeesMissingWaits keeps the checker honest: a
// direct depends_on on the role assignment, as before issue 14, is reported;
// a wait that depends on the role, and that the use depends on, is not.
func TestTerraformOrderCheckerSeesMissingWaits(t *testing.T) {
	direct := `
resource "azurerm_role_assignment" "deployer_key_vault_secrets" { scope = azurerm_key_vault.this.id }
resource "azurerm_key_vault_secret" "kafka" {
  key_vault_id = azurerm_key_vault.this.id
  depends_on   = [azurerm_role_assignment.deployer_key_vault_secrets]
}
`
	waited := `
variable "wait" { default = "45s" }
resource "azurerm_role_assignment" "deployer_key_vault_secrets" { scope = azurerm_key_vault.this.id }
resource "time_sleep" "kv" {
  create_duration = var.wait
  triggers        = { ids = join(",", azurerm_role_assignment.deployer_key_vault_secrets[*].id) }
}
resource "azurerm_key_vault_secret" "kafka" {
  key_vault_id = azurerm_key_vault.this.id # not azurerm_role_assignment.deployer_key_vault_secrets
  depends_on   = [time_sleep.kv]
}
`
	another := waited + `
resource "azurerm_key_vault_secret" "client_cert" {
  key_vault_id = azurerm_key_vault.this.id
  depends_on   = [azurerm_role_assignment.deployer_key_vault_secrets]
}
`
	short := strings.Replace(waited, `"45s"`, `"5s"`, 1)
	for _, tc := range []struct {
		name, src string
		want      string // the start of the expected problem about a secret, if any
	}{
		{"direct depends_on", direct, "azurerm_key_vault_secret.kafka does not wait"},
		{"time_sleep", waited, ""},
		{"a second secret without the wait", another, "azurerm_key_vault_secret.client_cert does not wait"},
		{"a wait too short", short, "time_sleep.kv (between azurerm_key_vault_secret.kafka"},
	} {
		root, err := parseHCL(tc.src, false)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range checkRolePropagation(root, 30*time.Second) {
			if strings.HasPrefix(p, "azurerm_key_vault_secret.") || strings.HasPrefix(p, "time_sleep.") {
				got = append(got, p)
			}
		}
		if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)) {
			t.Errorf("%s: problems %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTerraformAppIdentityIsAttached (issue 14, defects 1 and 3): every
// identity the app settings or Key Vault references name is one attached to
// the function app: EVENTHUBS__clientId is the client ID of a user-assigned
// identity listed in identity_ids (not a free variable naming an identity
// the app does not have), and key_vault_reference_identity_id is that
// identity too.
func TestTerraformAppIdentityIsAttached(t *testing.T) {
	root, err := parseHCLDir("../infra")
	if err != nil {
		t.Fatal(err)
	}
	apps := root.blocks("resource", "azurerm_linux_function_app")
	if len(apps) != 1 {
		t.Fatalf("%d function apps, want 1", len(apps))
	}
	app := apps[0].Body
	attached := attachedIdentities(app)
	if len(attached) == 0 {
		t.Fatalf("the function app has no user-assigned identity attached (identity { type = \"UserAssigned\", identity_ids = [...] })")
	}
	if kv := app.Attrs["key_vault_reference_identity_id"]; !slices.Contains(attached, strings.TrimSuffix(kv, ".id")) {
		t.Errorf("key_vault_reference_identity_id = %q, want one of the attached identities %v", kv, attached)
	}

	// The EVENTHUBS__clientId setting, wherever the app settings build it.
	var clientID string
	for _, l := range root.blocks("locals") {
		for _, expr := range l.Body.Attrs {
			if m := regexp.MustCompile(`EVENTHUBS__clientId\s*=\s*(\S+)`).FindStringSubmatch(expr); m != nil {
				clientID = m[1]
			}
		}
	}
	if m := regexp.MustCompile(`EVENTHUBS__clientId\s*=\s*(\S+)`).FindStringSubmatch(app.Attrs["app_settings"]); m != nil {
		clientID = m[1]
	}
	if clientID == "" {
		t.Fatalf("no EVENTHUBS__clientId app setting: with only a user-assigned identity the handler must name it")
	}
	id, ok := strings.CutSuffix(clientID, ".client_id")
	if !ok || !slices.Contains(attached, id) {
		t.Errorf("EVENTHUBS__clientId = %s, want the client_id of an identity attached to the app (%v)", clientID, attached)
	}
	if len(root.blocks("variable", "eventhubs_client_id")) > 0 {
		t.Errorf("variable eventhubs_client_id still exists, but the app cannot use an identity it does not have")
	}
}

// attachedIdentities returns the addresses (type.name) of the user-assigned
// identities in an app's identity block.
func attachedIdentities(app *hclBody) []string {
	var out []string
	for _, id := range app.blocks("identity") {
		if !strings.Contains(id.Body.Attrs["type"], "UserAssigned") {
			continue
		}
		for _, m := range regexp.MustCompile(`azurerm_user_assigned_identity\.[A-Za-z0-9_-]+`).FindAllString(id.Body.Attrs["identity_ids"], -1) {
			out = append(out, m)
		}
	}
	return out
}

// TestTerraformAppStartsAfterItsPrivateNetwork (issue 44, item 3): with
// private endpoints on, an app created in parallel with them starts before
// it can reach its vault, storage and namespace privately (its Key Vault
// references fail, its package is unreachable). The app must depend, on a
// reference path, on the private endpoints and on the DNS links that make
// their names resolve to them.
func TestTerraformAppStartsAfterItsPrivateNetwork(t *testing.T) {
	root, err := parseHCLDir("../infra")
	if err != nil {
		t.Fatal(err)
	}
	g := newTFGraph(root)
	for _, dep := range []string{"azurerm_private_endpoint.this", "azurerm_private_dns_zone_virtual_network_link.this"} {
		if g.nodes[dep] == nil {
			t.Errorf("%s is not in the module", dep)
			continue
		}
		if g.path("azurerm_linux_function_app.this", dep) == nil {
			t.Errorf("azurerm_linux_function_app.this does not wait for %s: Terraform creates them in parallel", dep)
		}
	}
}
