# Kafka SASL/OAUTHBEARER and AWS_MSK_IAM (kafka_sasl.tf): each mode's app
# settings, its secrets only as Key Vault references, and bad combinations
# failing the plan with a message naming the variable.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  location             = "westeurope"
  name_suffix          = "t23"
  kafka_brokers        = ["broker-0.kafka.example.com:9093"]
  kafka_sasl_mechanism = "none"
  # Alerts must notify someone (a check block fails the plan otherwise).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
}

run "no_token_mechanism_by_default" {
  assert {
    condition     = length(azurerm_key_vault_secret.kafka_sasl_token) == 0 && !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_OAUTH_CLIENT_ID")
    error_message = "Without kafka_sasl_token_mechanism there are no OAUTHBEARER/MSK settings or secrets."
  }
}

run "oidc_client_credentials" {
  variables {
    kafka_sasl_token_mechanism = "oauthbearer"
    kafka_oauth_token_endpoint = "https://idp.example.com/oauth2/token"
    kafka_oauth_client_id      = "mirror"
    kafka_oauth_client_secret  = "oidc-secret-do-not-leak"
    kafka_oauth_scope          = "kafka"
    kafka_oauth_extensions     = { logicalCluster = "lkc-abc12", identityPoolId = "pool-Ab1c" }
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "oauthbearer" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_OAUTH_TOKEN_ENDPOINT"] == "https://idp.example.com/oauth2/token" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_OAUTH_CLIENT_ID"] == "mirror" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_OAUTH_SCOPE"] == "kafka" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_OAUTH_EXTENSIONS"] == "identityPoolId=pool-Ab1c,logicalCluster=lkc-abc12"
    )
    error_message = "OIDC settings are not as configured."
  }

  assert {
    condition = (
      azurerm_key_vault_secret.kafka_sasl_token["KAFKA_SASL_OAUTH_CLIENT_SECRET"].key_vault_id == azurerm_key_vault.this.id &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_OAUTH_CLIENT_SECRET"] == "@Microsoft.KeyVault(SecretUri=${azurerm_key_vault_secret.kafka_sasl_token["KAFKA_SASL_OAUTH_CLIENT_SECRET"].versionless_id}/)"
    )
    error_message = "The client secret must be a Key Vault secret referenced by its app setting."
  }

  assert {
    condition     = !anytrue([for k, v in azurerm_linux_function_app.this[0].app_settings : strcontains(v, "oidc-secret-do-not-leak")])
    error_message = "The client secret must not be in a plain app setting."
  }
}

run "entra_id_uses_the_function_identity" {
  variables {
    kafka_sasl_token_mechanism = "oauthbearer"
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "oauthbearer" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_OAUTH_CLIENT_ID"] == azurerm_user_assigned_identity.function_app.client_id &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_OAUTH_TOKEN_ENDPOINT") &&
      length(azurerm_key_vault_secret.kafka_sasl_token) == 0
    )
    error_message = "Entra ID mode uses the function app's identity, no endpoint and no secret."
  }
}

run "msk_role_without_aws_keys" {
  variables {
    kafka_sasl_token_mechanism = "aws-msk-iam"
    kafka_aws_region           = "eu-west-1"
    kafka_aws_role_arn         = "arn:aws:iam::123456789012:role/ehmirror-msk"
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "aws-msk-iam" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_AWS_REGION"] == "eu-west-1" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_AWS_ROLE_ARN"] == "arn:aws:iam::123456789012:role/ehmirror-msk" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_AWS_WEB_IDENTITY_SCOPE"] == "api://AzureADTokenExchange/.default" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_OAUTH_CLIENT_ID"] == azurerm_user_assigned_identity.function_app.client_id &&
      length(azurerm_key_vault_secret.kafka_sasl_token) == 0
    )
    error_message = "MSK with a role: region, role, web identity scope and the function identity; no AWS secret."
  }
}

run "msk_key_pair_from_key_vault" {
  variables {
    kafka_sasl_token_mechanism  = "aws-msk-iam"
    kafka_aws_region            = "us-east-1"
    kafka_aws_access_key_id     = "AKIAEXAMPLE"
    kafka_aws_secret_access_key = "aws-secret-do-not-leak"
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_AWS_ACCESS_KEY_ID"] == "AKIAEXAMPLE" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_AWS_SECRET_ACCESS_KEY"] == "@Microsoft.KeyVault(SecretUri=${azurerm_key_vault_secret.kafka_sasl_token["KAFKA_SASL_AWS_SECRET_ACCESS_KEY"].versionless_id}/)" &&
      !anytrue([for k, v in azurerm_linux_function_app.this[0].app_settings : strcontains(v, "aws-secret-do-not-leak")])
    )
    error_message = "The AWS secret key must be a Key Vault reference, never a plain setting."
  }
}

run "token_mechanism_needs_no_sasl_password_mechanism" {
  command = plan

  variables {
    kafka_sasl_mechanism       = "scram-sha-512"
    kafka_sasl_username        = "u"
    kafka_sasl_password        = "p"
    kafka_sasl_token_mechanism = "oauthbearer"
  }

  expect_failures = [terraform_data.kafka_sasl_token_checks]
}

run "oidc_needs_a_secret" {
  command = plan

  variables {
    kafka_sasl_token_mechanism = "oauthbearer"
    kafka_oauth_token_endpoint = "https://idp.example.com/oauth2/token"
    kafka_oauth_client_id      = "mirror"
  }

  expect_failures = [terraform_data.kafka_sasl_token_checks]
}

run "msk_needs_role_or_key" {
  command = plan

  variables {
    kafka_sasl_token_mechanism = "aws-msk-iam"
    kafka_aws_region           = "eu-west-1"
  }

  expect_failures = [terraform_data.kafka_sasl_token_checks]
}

run "bad_role_arn" {
  command = plan

  variables {
    kafka_sasl_token_mechanism = "aws-msk-iam"
    kafka_aws_region           = "eu-west-1"
    kafka_aws_role_arn         = "ehmirror-msk"
  }

  expect_failures = [var.kafka_aws_role_arn]
}
