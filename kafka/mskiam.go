package kafka

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/aws/aws-sdk-go-v2/aws"
	signer "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/segmentio/kafka-go/sasl"
	mskiam "github.com/segmentio/kafka-go/sasl/aws_msk_iam_v2"
)

// SASLAWSMSKIAM is AWS MSK's IAM access control (mechanism AWS_MSK_IAM);
// SASL.AWS supplies the region and credentials.
const SASLAWSMSKIAM = "aws-msk-iam"

// mskSignatureExpiry is how long an AWS_MSK_IAM signature is valid
// (x-amz-expires), the Java client's and kafka-go's default.
const mskSignatureExpiry = 5 * time.Minute

// AWSMSKIAM configures AWS_MSK_IAM, signed with aws-sdk-go-v2's SigV4
// signer through github.com/segmentio/kafka-go/sasl/aws_msk_iam_v2.
type AWSMSKIAM struct {
	// Region is the cluster's AWS region. Required.
	Region string
	// Credentials sign the authentication. Required; see
	// [StaticAWSCredentials] and [WebIdentityAWSCredentials].
	Credentials aws.CredentialsProvider
	// Principal describes the credentials (role ARN, access key id) for
	// status and errors.
	Principal string
	// CredentialsSetting names, in errors, the setting that selects the
	// credentials (e.g. the role ARN setting). Default "AWS credentials".
	CredentialsSetting string
}

// StaticAWSCredentials is a provider of a fixed key pair (and optional
// session token).
func StaticAWSCredentials(accessKeyID, secretAccessKey, sessionToken string) aws.CredentialsProvider {
	return aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, sessionToken))
}

// WebIdentityAWS configures [WebIdentityAWSCredentials].
type WebIdentityAWS struct {
	// RoleARN is the role to assume. Required.
	RoleARN string
	// Region is the STS region. Required.
	Region string
	// STSEndpoint overrides the STS endpoint; empty: the regional one.
	STSEndpoint string
	// Credential obtains the web identity token from Microsoft Entra ID
	// (the app's managed identity). Required.
	Credential azcore.TokenCredential
	// Scope is the Entra ID scope of that token; its audience is what the
	// AWS IAM OIDC provider of the tenant trusts. Required.
	Scope string
	// SessionName is the role session name. Default "ehmirror".
	SessionName string
	// HTTPClient is STS's client; nil: the SDK's default.
	HTTPClient *http.Client
}

// WebIdentityAWSCredentials returns AWS credentials obtained with STS
// AssumeRoleWithWebIdentity and a token of the app's managed identity from
// Entra ID, so no long-lived AWS key is needed. They are cached and renewed
// a minute ahead of their expiry by aws.CredentialsCache.
func WebIdentityAWSCredentials(w WebIdentityAWS) (aws.CredentialsProvider, error) {
	if w.RoleARN == "" || w.Region == "" || w.Credential == nil || w.Scope == "" {
		return nil, errors.New("kafka: web identity AWS credentials need a role ARN, a region, an Entra ID credential and a scope")
	}
	opts := sts.Options{Region: w.Region}
	if w.STSEndpoint != "" {
		opts.BaseEndpoint = aws.String(w.STSEndpoint)
	}
	if w.HTTPClient != nil {
		opts.HTTPClient = w.HTTPClient
	}
	client := sts.New(opts)
	name := w.SessionName
	if name == "" {
		name = "ehmirror"
	}
	p := stscreds.NewWebIdentityRoleProvider(client, w.RoleARN, entraIdentityToken{cred: w.Credential, scope: w.Scope}, func(o *stscreds.WebIdentityRoleOptions) {
		o.RoleSessionName = name
	})
	// Renew a minute ahead, so that no signature is made with credentials
	// about to expire (STS grants at least 15 minutes).
	return aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = time.Minute }), nil
}

// entraIdentityToken is stscreds' IdentityTokenRetriever backed by Entra
// ID. Its interface has no context, so each call is bounded by a minute.
type entraIdentityToken struct {
	cred  azcore.TokenCredential
	scope string
}

func (e entraIdentityToken) GetIdentityToken() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t, err := e.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{e.scope}})
	if err != nil {
		return nil, fmt.Errorf("no Microsoft Entra ID token for scope %s: %s", e.scope, oneLine(err.Error()))
	}
	return []byte(t.Token), nil
}

// mskMechanism wraps aws_msk_iam_v2's mechanism: it names the setting in
// its errors and records the principal and expiry for status.
type mskMechanism struct {
	inner   *mskiam.Mechanism
	creds   aws.CredentialsProvider
	setting string
	state   *authState
}

func newMSKMechanism(a AWSMSKIAM, state *authState) (*mskMechanism, error) {
	if a.Region == "" {
		return nil, errors.New("kafka: SASL aws-msk-iam needs a region")
	}
	if a.Credentials == nil {
		return nil, errors.New("kafka: SASL aws-msk-iam needs credentials")
	}
	setting := a.CredentialsSetting
	if setting == "" {
		setting = "AWS credentials"
	}
	state.mechanism, state.principal = "AWS_MSK_IAM", a.Principal
	return &mskMechanism{
		inner:   &mskiam.Mechanism{Signer: signer.NewSigner(), Credentials: a.Credentials, Region: a.Region, Expiry: mskSignatureExpiry},
		creds:   a.Credentials,
		setting: setting,
		state:   state,
	}, nil
}

// Name implements sasl.Mechanism.
func (m *mskMechanism) Name() string { return m.inner.Name() }

// Start implements sasl.Mechanism: the signed payload of aws_msk_iam_v2.
func (m *mskMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	creds, err := m.creds.Retrieve(ctx)
	if err != nil {
		err = fmt.Errorf("%s: no AWS credentials: %s", m.setting, oneLine(err.Error()))
		m.state.fail(err)
		return nil, nil, err
	}
	sess, ir, err := m.inner.Start(ctx)
	if err != nil {
		err = fmt.Errorf("%s: signing the AWS_MSK_IAM payload: %s", m.setting, oneLine(err.Error()))
		m.state.fail(err)
		return nil, nil, err
	}
	exp := time.Now().Add(mskSignatureExpiry)
	if creds.CanExpire && creds.Expires.Before(exp) {
		exp = creds.Expires
	}
	m.state.ok("", exp)
	return sess, ir, nil
}

// refused implements refuser: the broker refused the signature.
func (m *mskMechanism) refused(code int16, msg string) error {
	err := fmt.Errorf("%s: the broker refused the AWS_MSK_IAM signature (error code %d: %s); check that the credentials' IAM policy allows kafka-cluster:Connect on this cluster, and the region", m.setting, code, oneLine(msg))
	m.state.fail(err)
	return err
}
