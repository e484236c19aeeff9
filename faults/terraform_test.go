package faults

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// grant is one role the function app's identity holds.
type grant struct {
	role  string
	scope string // the scope expression, e.g. azurerm_key_vault.this.id
	where string // resource address
}

// appPrincipal reports whether a principal_id expression names an identity
// of a function app: its system-assigned identity, or a user-assigned
// identity attached to one of the module's function apps.
func appPrincipal(root *hclBody, principal string) bool {
	if strings.Contains(principal, "azurerm_linux_function_app.") || strings.Contains(principal, "azurerm_function_app") {
		return true
	}
	for _, app := range root.blocks("resource", "azurerm_linux_function_app") {
		for _, id := range attachedIdentities(app.Body) {
			if strings.Contains(principal, id+".") {
				return true
			}
		}
	}
	return false
}

// appGrants evaluates every azurerm_role_assignment of the module whose
// principal is a function app's identity, expanding for_each maps given as
// literals. Anything it cannot evaluate is an error (a grant the test could
// not see is a grant it could not check).
func appGrants(root *hclBody) ([]grant, error) {
	var out []grant
	for _, bl := range root.blocks("resource", "azurerm_role_assignment") {
		a := bl.Body.Attrs
		if !appPrincipal(root, a["principal_id"]) {
			continue
		}
		addr := fmt.Sprintf("azurerm_role_assignment.%s (%s)", bl.Labels[1], bl.File)
		if _, ok := a["role_definition_id"]; ok {
			return nil, fmt.Errorf("%s: role_definition_id cannot be checked by name", addr)
		}
		role, scope := a["role_definition_name"], a["scope"]
		if !strings.HasPrefix(role, "each.value.") && !strings.HasPrefix(scope, "each.value.") {
			r, ok := unquote(role)
			if !ok {
				return nil, fmt.Errorf("%s: role_definition_name %s is not a literal", addr, role)
			}
			out = append(out, grant{role: r, scope: scope, where: addr})
			continue
		}
		each, err := parseObject(a["for_each"])
		if err != nil {
			return nil, fmt.Errorf("%s: for_each: %w", addr, err)
		}
		for key, expr := range each.Attrs {
			entry, err := parseObject(expr)
			if err != nil {
				return nil, fmt.Errorf("%s[%s]: %w", addr, key, err)
			}
			field := func(expr string) string {
				if name, ok := strings.CutPrefix(expr, "each.value."); ok {
					return entry.Attrs[name]
				}
				return expr
			}
			r, ok := unquote(field(role))
			if !ok {
				return nil, fmt.Errorf("%s[%s]: role %q is not a literal", addr, key, field(role))
			}
			out = append(out, grant{role: r, scope: field(scope), where: fmt.Sprintf("%s[%q]", addr, key)})
		}
	}
	slices.SortFunc(out, func(a, b grant) int { return strings.Compare(a.role, b.role) })
	return out, nil
}

// hostStorage is the scope of the Functions host's storage roles: the
// function apps' own storage account (identity-based AzureWebJobsStorage,
// issue 24 item 7), never the Capture account.
const hostStorage = "azurerm_storage_account.function.id"

// TestTerraformLeastPrivilege (9c) reads infra/*.tf and checks that the
// function app's identity is granted exactly "Azure Event Hubs Data Sender"
// on the module's Event Hubs namespace, "Key Vault Secrets User" on the
// module's own Key Vault (for the Key Vault references of the Kafka
// credentials and the content share) and the Functions host's storage roles
// (Blob Data Owner, Queue and Table Data Contributor) on the app's own
// storage account, and nothing else: no Owner or Contributor, no other role,
// no access policies (the vault is RBAC-only), no shared access
// (authorization) rules with Listen or Manage, SAS keys off by default on
// the namespace, and no key or connection string of Event Hubs wired into
// the app settings (the app uses its identity: EVENTHUBS__fullyQualifiedNamespace).
func TestTerraformLeastPrivilege(t *testing.T) {
	f := newFigures(t, "9c", "Terraform: the app holds only Event Hubs Data Sender (namespace), Key Vault Secrets User (its vault) and the host's roles on its own storage")
	root, err := parseHCLDir("../infra")
	if err != nil {
		t.Fatal(err)
	}
	grants, err := appGrants(root)
	if err != nil {
		t.Fatal(err)
	}
	grants = withoutDedupReceiver(t, root, grants)
	want := []grant{
		{role: "Azure Event Hubs Data Sender", scope: "azurerm_eventhub_namespace.this.id"},
		{role: "Key Vault Secrets User", scope: "azurerm_key_vault.this.id"},
		{role: "Storage Blob Data Owner", scope: hostStorage},
		{role: "Storage Queue Data Contributor", scope: hostStorage},
		{role: "Storage Table Data Contributor", scope: hostStorage},
	}
	if len(grants) != len(want) {
		t.Errorf("the function app holds %d roles, want exactly %d: %+v", len(grants), len(want), grants)
	}
	for i := range min(len(grants), len(want)) {
		if grants[i].role != want[i].role || grants[i].scope != want[i].scope {
			t.Errorf("grant %s: %q on %s, want %q on %s", grants[i].where, grants[i].role, grants[i].scope, want[i].role, want[i].scope)
		}
	}
	for _, g := range grants {
		if g.scope == hostStorage && strings.HasPrefix(g.role, "Storage ") {
			continue // the Functions host's own storage (AzureWebJobsStorage__*), checked above
		}
		if regexp.MustCompile(`(?i)owner|contributor|administrator|data owner|receiver|listen`).MatchString(g.role) {
			t.Errorf("%s grants %q", g.where, g.role)
		}
	}
	// The scopes are the module's own namespace and vault.
	if len(root.blocks("resource", "azurerm_eventhub_namespace", "this")) != 1 || len(root.blocks("resource", "azurerm_key_vault", "this")) != 1 {
		t.Errorf("the granted scopes are not resources of this module")
	}
	for _, kv := range root.blocks("resource", "azurerm_key_vault") {
		if kv.Body.Attrs["rbac_authorization_enabled"] != "true" && kv.Body.Attrs["enable_rbac_authorization"] != "true" {
			t.Errorf("key vault %s is not RBAC-only: access policies could grant more", kv.Labels[1])
		}
	}
	for _, typ := range []string{"azurerm_key_vault_access_policy", "azurerm_eventhub_namespace_authorization_rule", "azurerm_eventhub_authorization_rule", "azurerm_role_definition"} {
		if bl := root.blocks("resource", typ); len(bl) > 0 {
			t.Errorf("the module declares %s (%s): keys, Listen/Manage rules or custom roles", typ, bl[0].File)
		}
	}
	for _, ns := range root.blocks("resource", "azurerm_eventhub_namespace") {
		v := ns.Body.Attrs["local_authentication_enabled"]
		if name, ok := strings.CutPrefix(v, "var."); ok {
			vars := root.blocks("variable", name)
			if len(vars) != 1 || vars[0].Body.Attrs["default"] != "false" {
				t.Errorf("namespace SAS keys: local_authentication_enabled = %s does not default to false", v)
			}
		} else if v != "false" {
			t.Errorf("namespace SAS keys: local_authentication_enabled = %q, want false", v)
		}
	}

	// No Event Hubs key reaches the app: the app settings (and the locals
	// they merge) name the namespace, never a key or connection string.
	apps := root.blocks("resource", "azurerm_linux_function_app")
	if len(apps) != 1 {
		t.Fatalf("%d function apps, want 1", len(apps))
	}
	settingsText := apps[0].Body.Attrs["app_settings"]
	for _, l := range root.blocks("locals") {
		for name, expr := range l.Body.Attrs {
			if strings.Contains(settingsText, "local."+name) {
				settingsText += "\n" + expr
			}
		}
	}
	keyRef := regexp.MustCompile(`(?i)(primary|secondary)_(connection_string|key)|SharedAccessKey|authorization_rule`)
	if m := keyRef.FindString(settingsText); m != "" {
		t.Errorf("the app settings reference an Event Hubs key: %q", m)
	}
	if !strings.Contains(settingsText, "EVENTHUBS__fullyQualifiedNamespace") || regexp.MustCompile(`(?m)^\s*EVENTHUBS\s*=`).MatchString(settingsText) {
		t.Errorf("the app settings do not use the identity-based EVENTHUBS__fullyQualifiedNamespace alone")
	}
	for _, bl := range root.Blocks {
		for name, expr := range bl.Body.Attrs {
			if strings.Contains(expr, "azurerm_eventhub_namespace.") && keyRef.MatchString(expr) {
				t.Errorf("%s %v (%s): %s = %s reads a namespace key", bl.Type, bl.Labels, bl.File, name, expr)
			}
		}
	}
	if id := apps[0].Body.blocks("identity"); len(id) != 1 || (id[0].Body.Attrs["type"] != `"SystemAssigned"` && len(attachedIdentities(apps[0].Body)) == 0) {
		t.Errorf("the function app has no managed identity")
	}
	for _, g := range grants {
		t.Logf("%s: %q on %s", g.where, g.role, g.scope)
	}
	f.note("parsed %d blocks of infra/*.tf; the app's identity holds exactly: %s", len(root.Blocks), grantList(grants))
}

func grantList(gs []grant) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = fmt.Sprintf("%s on %s", g.role, strings.TrimSuffix(g.scope, ".id"))
	}
	return strings.Join(parts, ", ")
}

// TestTerraformCheckerSeesGrants keeps the checker honest: on a module with
// an extra grant (a literal Contributor, and a for_each entry with Listen
// rights), appGrants must report every grant to the app.
func TestTerraformCheckerSeesGrants(t *testing.T) {
	src := `
resource "azurerm_role_assignment" "function_app" {
  for_each = {
    sender = {
      scope = azurerm_eventhub_namespace.this.id # the namespace
      role  = "Azure Event Hubs Data Sender"
    }
    receiver = { scope = azurerm_eventhub_namespace.this.id, role = "Azure Event Hubs Data Receiver" }
  }
  scope                = each.value.scope
  role_definition_name = each.value.role
  principal_id         = azurerm_linux_function_app.this.identity[0].principal_id
}

/* a broad grant */
resource "azurerm_role_assignment" "oops" {
  scope                = azurerm_resource_group.this.id
  role_definition_name = "Contributor"
  principal_id         = azurerm_linux_function_app.this.identity[0].principal_id
}

resource "azurerm_role_assignment" "other" {
  scope                = azurerm_storage_account.capture.id
  role_definition_name = "Owner"
  principal_id         = data.azurerm_client_config.current.object_id
}
`
	root, err := parseHCL(src, false)
	if err != nil {
		t.Fatal(err)
	}
	grants, err := appGrants(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range grants {
		got = append(got, g.role+" on "+g.scope)
	}
	want := []string{
		"Azure Event Hubs Data Receiver on azurerm_eventhub_namespace.this.id",
		"Azure Event Hubs Data Sender on azurerm_eventhub_namespace.this.id",
		"Contributor on azurerm_resource_group.this.id",
	}
	if !slices.Equal(got, want) {
		t.Errorf("grants %q, want %q", got, want)
	}
}

// withoutDedupReceiver removes the one grant allowed beyond the least
// privilege: Azure Event Hubs Data Receiver on the namespace, declared only
// when mirror_deduplicate is on (MIRROR_DEDUPLICATE reads events back).
func withoutDedupReceiver(t *testing.T, root *hclBody, grants []grant) []grant {
	t.Helper()
	out := grants[:0:0]
	for _, g := range grants {
		if strings.HasPrefix(g.where, "azurerm_role_assignment.function_app_receiver ") {
			bl := root.blocks("resource", "azurerm_role_assignment", "function_app_receiver")
			if len(bl) != 1 || bl[0].Body.Attrs["count"] != "var.mirror_deduplicate ? 1 : 0" ||
				g.role != "Azure Event Hubs Data Receiver" || g.scope != "azurerm_eventhub_namespace.this.id" {
				t.Errorf("%s: %q on %s must be Data Receiver on the namespace, only when var.mirror_deduplicate", g.where, g.role, g.scope)
			}
			continue
		}
		out = append(out, g)
	}
	return out
}
