package config

import (
	"strings"
	"testing"
)

// oidc is a valid client credentials OAUTHBEARER environment.
func oidc() map[string]string {
	env := valid()
	env[KafkaSASLMechanism] = "OAUTHBEARER"
	env[KafkaOAuthTokenEndpoint] = "https://idp.example.com/oauth2/token"
	env[KafkaOAuthClientID] = "mirror"
	env[KafkaOAuthClientSecret] = "oidc-very-secret"
	env[KafkaOAuthScope] = "kafka"
	env[KafkaOAuthExtensions] = "logicalCluster=lkc-abc12, identityPoolId=pool-Ab1c"
	return env
}

// msk is a valid AWS_MSK_IAM environment with a role assumed through Entra
// ID.
func msk() map[string]string {
	env := valid()
	env[KafkaSASLMechanism] = "aws-msk-iam"
	env[KafkaAWSRegion] = "eu-west-1"
	env[KafkaAWSRoleARN] = "arn:aws:iam::123456789012:role/ehmirror-msk"
	env[KafkaAWSWebIdentityScope] = "api://AzureADTokenExchange/.default"
	return env
}

func TestOAuthAndMSKSettingsLoad(t *testing.T) {
	s, problems := Load(getenv(oidc()))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	o := s.SASL.OAuth
	if s.SASL.Mechanism != MechanismOAuthBearer || o == nil || o.ClientSecret != "oidc-very-secret" || o.Scope != "kafka" ||
		o.Extensions["logicalCluster"] != "lkc-abc12" || o.Extensions["identityPoolId"] != "pool-Ab1c" || len(o.Extensions) != 2 {
		t.Errorf("oauth settings wrong: %+v %+v", s.SASL, o)
	}
	entra := valid()
	entra[KafkaSASLMechanism] = "oauthbearer"
	if s, problems = Load(getenv(entra)); len(problems) > 0 || s.SASL.OAuth == nil || s.SASL.OAuth.TokenEndpoint != "" {
		t.Errorf("Entra ID (no token endpoint): %v %+v", problems, s.SASL)
	}
	if s, problems = Load(getenv(msk())); len(problems) > 0 || s.SASL.AWS == nil || s.SASL.AWS.RoleARN == "" {
		t.Errorf("MSK with a role: %v %+v", problems, s.SASL)
	}
	keys := valid()
	keys[KafkaSASLMechanism] = "aws-msk-iam"
	keys[KafkaAWSRegion] = "us-east-1"
	keys[KafkaAWSAccessKeyID] = "AKIAEXAMPLE"
	keys[KafkaAWSSecretAccessKey] = "aws-very-secret"
	if s, problems = Load(getenv(keys)); len(problems) > 0 || s.SASL.AWS == nil || s.SASL.AWS.SecretAccessKey != "aws-very-secret" {
		t.Errorf("MSK with keys: %v %+v", problems, s.SASL)
	}
	for k, v := range s.Summary() {
		if strings.Contains(v, "aws-very-secret") {
			t.Errorf("summary %s leaks the AWS secret: %q", k, v)
		}
	}
	if got := s.Summary()[KafkaAWSSecretAccessKey]; got != "(set, redacted)" {
		t.Errorf("summary %s = %q", KafkaAWSSecretAccessKey, got)
	}
	if !containsAll(Secrets(getenv(keys)), "aws-very-secret") || !containsAll(Secrets(getenv(oidc())), "oidc-very-secret") {
		t.Errorf("Secrets misses the OAuth or AWS secret")
	}
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, v := range list {
			found = found || v == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestBadOAuthAndMSKSettings: each bad value is one problem naming its
// setting, and no secret appears in it.
func TestBadOAuthAndMSKSettings(t *testing.T) {
	cases := []struct {
		base           func() map[string]string
		setting, value string
		extra          map[string]string
	}{
		{oidc, KafkaOAuthTokenEndpoint, "idp.example.com/token", nil},
		{oidc, KafkaOAuthClientID, "", nil},
		{oidc, KafkaOAuthClientSecret, "", nil},
		{oidc, KafkaOAuthClientSecret, "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/s/)", nil},
		{oidc, KafkaOAuthExtensions, "logicalCluster", nil},
		{oidc, KafkaOAuthExtensions, "auth=x", nil},
		{oidc, KafkaSASLPassword, "pw", nil},
		{oidc, KafkaAWSRegion, "eu-west-1", nil},
		{oidc, KafkaOAuthClientSecret, "s3cr3t", map[string]string{KafkaOAuthTokenEndpoint: ""}},
		{valid, KafkaOAuthTokenEndpoint, "https://idp.example.com/token", nil},
		{msk, KafkaAWSRegion, "", nil},
		{msk, KafkaAWSRegion, "Ireland", nil},
		{msk, KafkaAWSRoleARN, "ehmirror-msk", nil},
		{msk, KafkaAWSRoleARN, "", map[string]string{KafkaAWSWebIdentityScope: ""}},
		{msk, KafkaAWSWebIdentityScope, "", nil},
		{msk, KafkaAWSRoleARN, "arn:aws:iam::123456789012:role/x", map[string]string{KafkaAWSAccessKeyID: "AKIA"}},
		{msk, KafkaAWSSecretAccessKey, "", map[string]string{KafkaAWSRoleARN: "", KafkaAWSWebIdentityScope: "", KafkaAWSAccessKeyID: "AKIA"}},
		{msk, KafkaAWSAccessKeyID, "", map[string]string{KafkaAWSRoleARN: "", KafkaAWSWebIdentityScope: "", KafkaAWSSecretAccessKey: "aws-very-secret"}},
		{msk, KafkaAWSSTSEndpoint, "sts", nil},
		{msk, KafkaOAuthClientID, "mi-client", map[string]string{KafkaAWSRoleARN: "", KafkaAWSWebIdentityScope: "", KafkaAWSAccessKeyID: "AKIA", KafkaAWSSecretAccessKey: "aws-very-secret"}},
		{msk, KafkaOAuthScope, "x", nil},
	}
	for _, c := range cases {
		t.Run(c.setting+"="+c.value, func(t *testing.T) {
			env := c.base()
			for k, v := range c.extra {
				env[k] = v
			}
			env[c.setting] = c.value
			_, problems := Load(getenv(env))
			if len(problems) != 1 {
				t.Fatalf("want exactly one problem, got %d: %v", len(problems), problems)
			}
			line := problems[0].String()
			if problems[0].Setting != c.setting || !strings.HasPrefix(line, c.setting+": ") || strings.Contains(line, "\n") {
				t.Errorf("problem is not one line naming %s: %q", c.setting, line)
			}
			for _, secret := range []string{"oidc-very-secret", "aws-very-secret", "s3cr3t"} {
				if strings.Contains(line, secret) {
					t.Errorf("problem leaks a secret: %q", line)
				}
			}
		})
	}
}
