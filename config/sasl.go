package config

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// SASL/OAUTHBEARER and AWS_MSK_IAM settings (issue 23).
const (
	// KafkaOAuthTokenEndpoint is the OIDC token endpoint for the client
	// credentials grant; unset, OAUTHBEARER tokens come from Microsoft
	// Entra ID (the app's managed identity).
	KafkaOAuthTokenEndpoint = "KAFKA_SASL_OAUTH_TOKEN_ENDPOINT"
	// KafkaOAuthClientID is the OIDC client id; with Entra ID, the client
	// id of a user-assigned managed identity (unset: the default
	// credential chain).
	KafkaOAuthClientID = "KAFKA_SASL_OAUTH_CLIENT_ID"
	// KafkaOAuthClientSecret is the OIDC client secret (a secret).
	KafkaOAuthClientSecret = "KAFKA_SASL_OAUTH_CLIENT_SECRET"
	// KafkaOAuthScope is the scope requested; with Entra ID it defaults
	// to https://<broker host>/.default.
	KafkaOAuthScope = "KAFKA_SASL_OAUTH_SCOPE"
	// KafkaOAuthExtensions are SASL extensions, key=value,key=value (for
	// example logicalCluster and identityPoolId for Confluent Cloud).
	KafkaOAuthExtensions = "KAFKA_SASL_OAUTH_EXTENSIONS"

	// KafkaAWSRegion is the MSK cluster's AWS region.
	KafkaAWSRegion = "KAFKA_SASL_AWS_REGION"
	// KafkaAWSAccessKeyID is a static access key id.
	KafkaAWSAccessKeyID = "KAFKA_SASL_AWS_ACCESS_KEY_ID"
	// KafkaAWSSecretAccessKey is its secret (a secret).
	KafkaAWSSecretAccessKey = "KAFKA_SASL_AWS_SECRET_ACCESS_KEY"
	// KafkaAWSSessionToken is an optional session token (a secret).
	KafkaAWSSessionToken = "KAFKA_SASL_AWS_SESSION_TOKEN"
	// KafkaAWSRoleARN is the role assumed with AssumeRoleWithWebIdentity,
	// with an Entra ID token of the app's managed identity.
	KafkaAWSRoleARN = "KAFKA_SASL_AWS_ROLE_ARN"
	// KafkaAWSWebIdentityScope is the Entra ID scope of that token; its
	// audience is what the AWS IAM OIDC provider trusts.
	KafkaAWSWebIdentityScope = "KAFKA_SASL_AWS_WEB_IDENTITY_SCOPE"
	// KafkaAWSSTSEndpoint overrides the STS endpoint (a VPC endpoint).
	KafkaAWSSTSEndpoint = "KAFKA_SASL_AWS_STS_ENDPOINT"
)

// Mechanism values of KAFKA_SASL_MECHANISM beyond PLAIN and SCRAM.
const (
	MechanismOAuthBearer = "oauthbearer"
	MechanismAWSMSKIAM   = "aws-msk-iam"
)

// OAuth holds the SASL/OAUTHBEARER settings.
type OAuth struct {
	// TokenEndpoint set: OIDC client credentials; empty: Entra ID.
	TokenEndpoint string
	ClientID      string
	ClientSecret  string
	Scope         string
	Extensions    map[string]string
}

// AWS holds the AWS_MSK_IAM settings: a static key pair, or a role assumed
// with a web identity token from Entra ID.
type AWS struct {
	Region           string
	AccessKeyID      string
	SecretAccessKey  string
	SessionToken     string
	RoleARN          string
	WebIdentityScope string
	STSEndpoint      string
	// EntraClientID selects a user-assigned managed identity for the web
	// identity token (KAFKA_SASL_OAUTH_CLIENT_ID); empty: the default.
	EntraClientID string
}

var (
	awsRegion  = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
	awsRoleARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
)

// saslExtra reads the OAUTHBEARER and AWS_MSK_IAM settings into s and
// checks them against the mechanism.
func (l *loader) saslExtra(s *SASL) {
	o := OAuth{
		TokenEndpoint: l.text(KafkaOAuthTokenEndpoint, ""),
		ClientID:      l.text(KafkaOAuthClientID, ""),
		ClientSecret:  l.secret(KafkaOAuthClientSecret),
		Scope:         l.text(KafkaOAuthScope, ""),
	}
	ext := l.text(KafkaOAuthExtensions, "")
	if ext != "" {
		o.Extensions = map[string]string{}
		for _, kv := range strings.Split(ext, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || !validExtensionKey(k) || strings.ContainsAny(v, "\x01,") {
				l.problem(KafkaOAuthExtensions, "%q is not key=value; want key=value pairs separated by commas, keys of letters only (not auth), e.g. logicalCluster=lkc-abc12,identityPoolId=pool-Ab1c", kv)
				o.Extensions = nil
				break
			}
			o.Extensions[k] = v
		}
	}
	a := AWS{
		Region:           l.text(KafkaAWSRegion, ""),
		AccessKeyID:      l.text(KafkaAWSAccessKeyID, ""),
		SecretAccessKey:  l.secret(KafkaAWSSecretAccessKey),
		SessionToken:     l.secret(KafkaAWSSessionToken),
		RoleARN:          l.text(KafkaAWSRoleARN, ""),
		WebIdentityScope: l.text(KafkaAWSWebIdentityScope, ""),
		STSEndpoint:      l.text(KafkaAWSSTSEndpoint, ""),
		EntraClientID:    o.ClientID,
	}
	switch s.Mechanism {
	case MechanismOAuthBearer:
		s.OAuth = &o
		l.checkOAuth(o)
	case MechanismAWSMSKIAM:
		s.AWS = &a
		l.checkAWS(a)
	}
	if s.Mechanism != MechanismOAuthBearer {
		l.unused(s.Mechanism, MechanismOAuthBearer, KafkaOAuthTokenEndpoint, KafkaOAuthClientSecret, KafkaOAuthScope, KafkaOAuthExtensions)
		if s.Mechanism != MechanismAWSMSKIAM {
			l.unused(s.Mechanism, MechanismOAuthBearer, KafkaOAuthClientID)
		}
	}
	if s.Mechanism != MechanismAWSMSKIAM {
		l.unused(s.Mechanism, MechanismAWSMSKIAM, KafkaAWSRegion, KafkaAWSAccessKeyID, KafkaAWSSecretAccessKey, KafkaAWSSessionToken, KafkaAWSRoleARN, KafkaAWSWebIdentityScope, KafkaAWSSTSEndpoint)
	}
	if s.Mechanism == MechanismOAuthBearer || s.Mechanism == MechanismAWSMSKIAM {
		for _, name := range []string{KafkaSASLUsername, KafkaSASLPassword} {
			if l.has(name) {
				l.problem(name, "set, but %s=%s takes no user name or password", KafkaSASLMechanism, s.Mechanism)
			}
		}
	}
}

// unused reports settings of mechanism want set while another is chosen.
func (l *loader) unused(mechanism, want string, names ...string) {
	for _, name := range names {
		if l.has(name) {
			l.problem(name, "set, but %s is %s; it is used with %s=%s", KafkaSASLMechanism, orNone(mechanism), KafkaSASLMechanism, want)
		}
	}
}

func (l *loader) checkOAuth(o OAuth) {
	if o.TokenEndpoint == "" {
		// Entra ID: the scope defaults per broker; a client id selects a
		// user-assigned managed identity; no secret.
		if l.has(KafkaOAuthClientSecret) {
			l.problem(KafkaOAuthClientSecret, "set, but %s is not; set the OIDC token endpoint for client credentials, or remove the secret to use Microsoft Entra ID (managed identity)", KafkaOAuthTokenEndpoint)
		}
		return
	}
	if u, err := url.Parse(o.TokenEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		l.problem(KafkaOAuthTokenEndpoint, "%q is not a URL; want the OIDC provider's token endpoint, e.g. https://login.example.com/oauth2/token", o.TokenEndpoint)
	}
	if o.ClientID == "" {
		l.problem(KafkaOAuthClientID, "missing; the client credentials grant at %s needs a client id", KafkaOAuthTokenEndpoint)
	}
	if o.ClientSecret == "" && !l.has(KafkaOAuthClientSecret) {
		l.problem(KafkaOAuthClientSecret, "missing; the client credentials grant at %s needs a client secret", KafkaOAuthTokenEndpoint)
	}
}

func (l *loader) checkAWS(a AWS) {
	switch {
	case a.Region == "":
		l.problem(KafkaAWSRegion, "missing; %s=%s needs the cluster's AWS region, e.g. eu-west-1", KafkaSASLMechanism, MechanismAWSMSKIAM)
	case !awsRegion.MatchString(a.Region):
		l.problem(KafkaAWSRegion, "%q is not an AWS region; want e.g. eu-west-1", a.Region)
	}
	keys := a.AccessKeyID != "" || l.has(KafkaAWSSecretAccessKey)
	switch {
	case keys && a.RoleARN != "":
		l.problem(KafkaAWSRoleARN, "set together with %s; use an access key, or a role assumed with the app's Entra ID token, not both", KafkaAWSAccessKeyID)
	case a.RoleARN != "":
		if !awsRoleARN.MatchString(a.RoleARN) {
			l.problem(KafkaAWSRoleARN, "%q is not an IAM role ARN; want arn:aws:iam::123456789012:role/NAME", a.RoleARN)
		}
		if a.WebIdentityScope == "" {
			l.problem(KafkaAWSWebIdentityScope, "missing; the Entra ID token for %s needs a scope whose audience the AWS IAM OIDC provider trusts, e.g. api://AzureADTokenExchange/.default", KafkaAWSRoleARN)
		}
	case keys:
		if l.has(KafkaOAuthClientID) {
			l.problem(KafkaOAuthClientID, "set, but %s=%s uses it only with %s (the managed identity whose token is exchanged for the role)", KafkaSASLMechanism, MechanismAWSMSKIAM, KafkaAWSRoleARN)
		}
		if a.AccessKeyID == "" {
			l.problem(KafkaAWSAccessKeyID, "missing; %s is set", KafkaAWSSecretAccessKey)
		} else if a.SecretAccessKey == "" && !l.has(KafkaAWSSecretAccessKey) {
			l.problem(KafkaAWSSecretAccessKey, "missing; %s is set", KafkaAWSAccessKeyID)
		}
	default:
		l.problem(KafkaAWSRoleARN, "missing; %s=%s needs %s (and %s) or an access key (%s, %s)", KafkaSASLMechanism, MechanismAWSMSKIAM, KafkaAWSRoleARN, KafkaAWSWebIdentityScope, KafkaAWSAccessKeyID, KafkaAWSSecretAccessKey)
	}
	if a.WebIdentityScope != "" && a.RoleARN == "" {
		l.problem(KafkaAWSWebIdentityScope, "set, but %s is not", KafkaAWSRoleARN)
	}
	if a.STSEndpoint != "" {
		if u, err := url.Parse(a.STSEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			l.problem(KafkaAWSSTSEndpoint, "%q is not a URL; want e.g. https://sts.eu-west-1.amazonaws.com", a.STSEndpoint)
		}
	}
}

// validExtensionKey follows RFC 7628 §3.1: letters only, "auth" reserved.
func validExtensionKey(k string) bool {
	if k == "" || k == "auth" {
		return false
	}
	for _, r := range k {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}

// saslSummary is the status view of the OAUTHBEARER and AWS_MSK_IAM
// settings, secrets redacted.
func (s SASL) saslSummary(redact func(string) string) map[string]string {
	out := map[string]string{}
	if o := s.OAuth; o != nil {
		out[KafkaOAuthTokenEndpoint] = o.TokenEndpoint
		if o.TokenEndpoint == "" {
			out[KafkaOAuthTokenEndpoint] = "(unset: Microsoft Entra ID)"
		}
		out[KafkaOAuthClientID] = o.ClientID
		out[KafkaOAuthClientSecret] = redact(o.ClientSecret)
		out[KafkaOAuthScope] = o.Scope
		var ext []string
		for k, v := range o.Extensions {
			ext = append(ext, k+"="+v)
		}
		slices.Sort(ext)
		out[KafkaOAuthExtensions] = strings.Join(ext, ",")
	}
	if a := s.AWS; a != nil {
		out[KafkaAWSRegion] = a.Region
		out[KafkaAWSAccessKeyID] = a.AccessKeyID
		out[KafkaAWSSecretAccessKey] = redact(a.SecretAccessKey)
		out[KafkaAWSSessionToken] = redact(a.SessionToken)
		out[KafkaAWSRoleARN] = a.RoleARN
		out[KafkaAWSWebIdentityScope] = a.WebIdentityScope
		out[KafkaAWSSTSEndpoint] = a.STSEndpoint
	}
	return out
}
