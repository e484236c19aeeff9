package sasltest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/aws/aws-sdk-go-v2/aws"
	kgoaws "github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/kafka/sasltest"
	"github.com/ehmirror/ehmirror/mirror"
)

const (
	mskRegion  = "eu-west-1"
	mskRoleARN = "arn:aws:iam::123456789012:role/ehmirror-msk"
	// awsAudience is what the AWS IAM OIDC provider for the Entra tenant
	// trusts (the token's aud).
	awsAudience = "api://AzureADTokenExchange"
)

// Fixed test credentials.
var (
	mirrorKeys   = aws.Credentials{AccessKeyID: "AKIAMIRRORTEST", SecretAccessKey: "mirror-aws-secret-key"}
	producerKeys = aws.Credentials{AccessKeyID: "AKIAPRODUCERTEST", SecretAccessKey: "producer-aws-secret-key"}
)

// newMSKEnv is kfake behind an AWS_MSK_IAM front that knows the fixed
// test keys; the producer signs with franz-go's own AWS_MSK_IAM
// implementation (an independent check of the verifier).
func newMSKEnv(t *testing.T, sessionLifetime time.Duration) (*env, *sasltest.MSKVerifier) {
	t.Helper()
	// franz-go takes the region from an MSK host name, else from here.
	t.Setenv("AWS_REGION", mskRegion)
	v := &sasltest.MSKVerifier{Region: mskRegion, Host: "127.0.0.1"}
	v.AddCredentials(mirrorKeys, "user/mirror")
	v.AddCredentials(producerKeys, "user/producer")
	e := startEnv(t, &sasltest.Front{Verifier: v, SessionLifetime: sessionLifetime})
	e.producer = kgoaws.ManagedStreamingIAM(func(context.Context) (kgoaws.Auth, error) {
		return kgoaws.Auth{AccessKey: producerKeys.AccessKeyID, SecretKey: producerKeys.SecretAccessKey}, nil
	})
	return e, v
}

func mskSASL(creds aws.CredentialsProvider, principal, setting string) kafka.SASL {
	return kafka.SASL{Mechanism: kafka.SASLAWSMSKIAM, AWS: &kafka.AWSMSKIAM{Region: mskRegion, Credentials: creds, Principal: principal, CredentialsSetting: setting}}
}

// drainError is the one-line failure of a drain that must fail.
func drainError(t *testing.T, m *mirror.Mirror) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := m.Drain(ctx, "must-fail", mirror.Limits{MaxDuration: 10 * time.Second})
	switch {
	case err != nil:
		return err.Error()
	case rep.Failed():
		return strings.Join(rep.Errors, "; ")
	}
	t.Fatalf("drain succeeded: %s", rep.Summary())
	return ""
}

// TestMSKIAMStaticKeys: AWS_MSK_IAM signed by aws_msk_iam_v2 with a fixed
// key pair; the broker recomputes every signature with the same signer.
// 6000 records across 1 s sessions arrive once and in order; a wrong
// secret key is refused with a line naming the setting; nothing is
// committed by it.
func TestMSKIAMStaticKeys(t *testing.T) {
	e, _ := newMSKEnv(t, time.Second)
	const n = 6000
	produced, prodErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(produced)
		prodErr <- e.produce(n, 4*time.Second)
	}()
	src := e.sourceSASL(mskSASL(kafka.StaticAWSCredentials(mirrorKeys.AccessKeyID, mirrorKeys.SecretAccessKey, ""), mirrorKeys.AccessKeyID, "KEY_ID"))
	drains := e.drainAll(e.mirror(src, false), produced, 2*time.Second, 2*time.Minute)
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	lost, dups, order := e.check(n)
	st := e.front.Stats()
	t.Logf("%d records over %d drains; %d authentications, %d re-authentications, %d refused; principals %v; lost %d, duplicates %d, order violations %d",
		n, drains, st.Authenticated, st.Reauthenticated, st.Refused, st.Principals, lost, dups, order)
	if lost != 0 || dups != 0 || order != 0 || st.Refused != 0 || st.Reauthenticated < 3 {
		t.Errorf("lost %d, duplicates %d, order violations %d, refused %d (%s), re-authentications %d; want 0 lost/duplicated/out of order/refused and renewed sessions",
			lost, dups, order, st.Refused, st.LastRefusal, st.Reauthenticated)
	}
	if a := src.Auth(); a.Mechanism != "AWS_MSK_IAM" || a.Principal != mirrorKeys.AccessKeyID || a.TokenExpiry.IsZero() || a.LastError != "" {
		t.Errorf("Auth() = %+v", a)
	}

	e2, _ := newMSKEnv(t, 0)
	if err := e2.produce(30, 0); err != nil {
		t.Fatal(err)
	}
	bad := e2.sourceSASL(mskSASL(kafka.StaticAWSCredentials(mirrorKeys.AccessKeyID, "wrong-aws-secret", ""), mirrorKeys.AccessKeyID, "SECRET_KEY"))
	line := drainError(t, e2.mirror(bad, false))
	t.Logf("wrong secret: %s", line)
	if !strings.Contains(line, "SECRET_KEY: the broker refused the AWS_MSK_IAM signature") || strings.Contains(line, "wrong-aws-secret") || strings.Contains(line, "\n") {
		t.Errorf("drain error %q; want one line naming SECRET_KEY, without the secret", line)
	}
	if a := bad.Auth(); !strings.Contains(a.LastError, "SECRET_KEY:") {
		t.Errorf("Auth().LastError = %q", a.LastError)
	}
	if st := e2.front.Stats(); !strings.Contains(st.LastRefusal, "signature mismatch") {
		t.Errorf("the broker refused for %q, want a signature mismatch", st.LastRefusal)
	}
	if n := e2.emu.Stats().EventsStored; n != 0 {
		t.Errorf("%d events mirrored with a refused signature", n)
	}
}

// TestMSKIAMWebIdentity: no AWS key at all. The app's managed identity
// (azidentity against the local identity endpoint) gets an Entra ID token
// for the AWS audience; STS (an httptest stand-in that checks the token
// against the issuer's JWKS and the role ARN) exchanges it with
// AssumeRoleWithWebIdentity for temporary credentials renewed every 2 s, which sign
// AWS_MSK_IAM. Records arrive once, in order, while credentials and
// sessions expire. A role the STS refuses fails the drain with a line
// naming the role setting.
func TestMSKIAMWebIdentity(t *testing.T) {
	is, err := sasltest.NewIssuer(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(is.Close)
	t.Setenv("IDENTITY_ENDPOINT", is.IdentityEndpoint())
	t.Setenv("IDENTITY_HEADER", is.IdentityHeader())
	cred, err := azidentity.NewManagedIdentityCredential(nil)
	if err != nil {
		t.Fatal(err)
	}
	e, v := newMSKEnv(t, time.Second)
	// 62 s credentials, renewed a minute ahead: a new set every 2 s.
	sts := sasltest.NewSTS(mskRoleARN, &sasltest.OAuthVerifier{JWKSURL: is.JWKSURL(), Issuer: is.URL(), Audience: awsAudience}, v, 62*time.Second)
	t.Cleanup(sts.Close)
	webIdentity := func(role string) aws.CredentialsProvider {
		p, err := kafka.WebIdentityAWSCredentials(kafka.WebIdentityAWS{RoleARN: role, Region: mskRegion, STSEndpoint: sts.URL(), Credential: cred, Scope: awsAudience + "/.default"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	const n = 6000
	produced, prodErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(produced)
		prodErr <- e.produce(n, 5*time.Second)
	}()
	src := e.sourceSASL(mskSASL(webIdentity(mskRoleARN), mskRoleARN, "ROLE_ARN"))
	drains := e.drainAll(e.mirror(src, false), produced, 2*time.Second, 2*time.Minute)
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	lost, dups, order := e.check(n)
	st := e.front.Stats()
	t.Logf("%d records over %d drains; %d STS calls; %d authentications, %d re-authentications, %d refused; principals %v; lost %d, duplicates %d, order violations %d",
		n, drains, sts.Calls(), st.Authenticated, st.Reauthenticated, st.Refused, st.Principals, lost, dups, order)
	if lost != 0 || dups != 0 || order != 0 || st.Refused != 0 {
		t.Errorf("lost %d, duplicates %d, order violations %d, refused %d (%s); want 0", lost, dups, order, st.Refused, st.LastRefusal)
	}
	if sts.Calls() < 2 || st.Reauthenticated < 3 {
		t.Errorf("%d STS calls, %d re-authentications; want the credentials renewed and sessions re-authenticated", sts.Calls(), st.Reauthenticated)
	}
	if a := src.Auth(); a.Mechanism != "AWS_MSK_IAM" || a.Principal != mskRoleARN || a.TokenExpiry.IsZero() || a.LastError != "" {
		t.Errorf("Auth() = %+v", a)
	}

	other := e.sourceSASL(mskSASL(webIdentity("arn:aws:iam::123456789012:role/not-trusted"), "not-trusted", "ROLE_ARN"))
	line := drainError(t, e.mirror(other, false))
	t.Logf("untrusted role: %s", line)
	if !strings.Contains(line, "ROLE_ARN: no AWS credentials") || !strings.Contains(line, "AccessDenied") || strings.Contains(line, "\n") {
		t.Errorf("drain error %q; want one line naming ROLE_ARN and STS's AccessDenied", line)
	}
}
