package main

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/kafka"
)

// oauthNames are the settings OAUTHBEARER errors name.
var oauthNames = kafka.OAuthSettings{
	TokenEndpoint: config.KafkaOAuthTokenEndpoint,
	ClientID:      config.KafkaOAuthClientID,
	ClientSecret:  config.KafkaOAuthClientSecret,
	Scope:         config.KafkaOAuthScope,
	Extensions:    config.KafkaOAuthExtensions,
}

// kafkaSASL builds the Kafka adapter's SASL settings: PLAIN and SCRAM as
// they are; OAUTHBEARER with OIDC client credentials or Microsoft Entra ID
// tokens; AWS_MSK_IAM with a key pair or a role assumed with an Entra ID
// token.
func kafkaSASL(s config.SASL) (kafka.SASL, error) {
	out := kafka.SASL{Mechanism: s.Mechanism, Username: s.Username, Password: s.Password}
	switch {
	case s.OAuth != nil && s.OAuth.TokenEndpoint != "":
		o := s.OAuth
		var scopes []string
		if o.Scope != "" {
			scopes = []string{o.Scope}
		}
		tokens, err := kafka.NewClientCredentialsTokens(kafka.ClientCredentials{TokenURL: o.TokenEndpoint, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: scopes, Names: oauthNames})
		if err != nil {
			return out, err
		}
		out.OAuth = &kafka.OAuthBearer{Tokens: tokens, Extensions: o.Extensions, Principal: o.ClientID, Names: oauthNames}
	case s.OAuth != nil:
		o := s.OAuth
		cred, principal, err := entraCredential(o.ClientID)
		if err != nil {
			return out, err
		}
		names := oauthNames
		names.TokenEndpoint = config.KafkaOAuthClientID // the identity
		tokens, err := kafka.NewEntraTokens(kafka.EntraTokens{Credential: cred, Scope: o.Scope, Names: names})
		if err != nil {
			return out, err
		}
		out.OAuth = &kafka.OAuthBearer{Tokens: tokens, Extensions: o.Extensions, Principal: principal, Names: names}
	case s.AWS != nil && s.AWS.RoleARN != "":
		a := s.AWS
		// The Entra ID token comes from the app's default identity; a
		// user-assigned one is selected with KAFKA_SASL_OAUTH_CLIENT_ID.
		cred, _, err := entraCredential(a.EntraClientID)
		if err != nil {
			return out, err
		}
		creds, err := kafka.WebIdentityAWSCredentials(kafka.WebIdentityAWS{RoleARN: a.RoleARN, Region: a.Region, STSEndpoint: a.STSEndpoint, Credential: cred, Scope: a.WebIdentityScope})
		if err != nil {
			return out, err
		}
		out.AWS = &kafka.AWSMSKIAM{Region: a.Region, Credentials: creds, Principal: a.RoleARN, CredentialsSetting: config.KafkaAWSRoleARN}
	case s.AWS != nil:
		a := s.AWS
		out.AWS = &kafka.AWSMSKIAM{Region: a.Region, Credentials: kafka.StaticAWSCredentials(a.AccessKeyID, a.SecretAccessKey, a.SessionToken), Principal: a.AccessKeyID, CredentialsSetting: config.KafkaAWSSecretAccessKey}
	}
	return out, nil
}

// entraCredential is the app's managed identity: user-assigned when a
// client id is given, otherwise the default chain (system-assigned in
// Azure, workload identity or az login elsewhere).
func entraCredential(clientID string) (azcore.TokenCredential, string, error) {
	if clientID != "" {
		c, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ID: azidentity.ClientID(clientID)})
		if err != nil {
			return nil, "", fmt.Errorf("%s: managed identity: %w", config.KafkaOAuthClientID, err)
		}
		return c, "managed identity " + clientID, nil
	}
	c, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: default Azure credential: %w", config.KafkaOAuthClientID, err)
	}
	return c, "Microsoft Entra ID (default credential)", nil
}
