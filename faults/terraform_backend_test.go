package faults

import (
	"strings"
	"testing"
)

// TestTerraformStateIsRemoteAndPartial (issue 24, item 5): with a local
// state, a pipeline's second run starts from nothing and fails with
// "already exists". infra/ declares the azurerm backend, partially: no
// account, container, key or credential in the repository, everything
// from `terraform init -backend-config` (scripts/deploy.sh). The example
// pipeline authenticates with OIDC federation (no client secret), passes
// its backend settings and never applies twice at once.
func TestTerraformStateIsRemoteAndPartial(t *testing.T) {
	root, err := parseHCLDir("../infra")
	if err != nil {
		t.Fatal(err)
	}
	var backends []*hclBlock
	for _, tf := range root.blocks("terraform") {
		backends = append(backends, tf.Body.blocks("backend")...)
	}
	if len(backends) != 1 || backends[0].Labels[0] != "azurerm" {
		t.Fatalf("infra/ declares backends %v, want one backend \"azurerm\"", backendLabels(backends))
	}
	if b := backends[0].Body; len(b.Attrs) != 0 || len(b.Blocks) != 0 {
		t.Errorf("backend \"azurerm\" in %s sets %v: settings belong in -backend-config, not in the repository", backends[0].File, b.Attrs)
	}

	wf := readFile(t, "../infra/examples/github-actions-deploy.yml")
	for _, want := range []string{
		"id-token: write",      // OIDC token for azure/login and azurerm
		"azure/login@",         // az CLI for deploy.sh
		`ARM_USE_OIDC: "true"`, // provider and backend without a secret
		"concurrency:",         // one apply at a time
		"cancel-in-progress: false",
		"make deploy",
		"--yes",
		"--backend-config=key=",
		"--backend-config=use_oidc=true",
		"terraform_wrapper: false", // deploy.sh reads terraform output -raw
		// Issue 44: the providers pinned with the registry's hashes for the
		// runner's platform, and a fresh login for a long readiness wait.
		"terraform -chdir=infra providers lock",
		"-platform=linux_amd64",
		"DEPLOY_AZ_LOGIN:",
		"ACTIONS_ID_TOKEN_REQUEST_URL",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("infra/examples/github-actions-deploy.yml lacks %q", want)
		}
	}
	for _, bad := range []string{"client-secret", "creds:", "ARM_CLIENT_SECRET", "ARM_ACCESS_KEY"} {
		if strings.Contains(wf, bad) {
			t.Errorf("infra/examples/github-actions-deploy.yml uses %q: OIDC federation needs no secret", bad)
		}
	}
}

// backendLabels lists the backends' types.
func backendLabels(bs []*hclBlock) []string {
	var out []string
	for _, b := range bs {
		out = append(out, strings.Join(b.Labels, " "))
	}
	return out
}
