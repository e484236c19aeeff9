# Kafka SASL (kafka_sasl.tf): one variable, kafka_sasl_mechanism, for every
# mechanism; each OAUTHBEARER/AWS_MSK_IAM mode's app settings, its secrets
# only as Key Vault references, and bad combinations failing the plan with a
# message naming the variable.

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
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "no_token_settings_without_a_token_mechanism" {
  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "none" &&
      length(azurerm_key_vault_secret.kafka_sasl_token) == 0 && length(azurerm_key_vault_secret.kafka) == 0 &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_OAUTH_CLIENT_ID")
    )
    error_message = "kafka_sasl_mechanism = \"none\": no OAUTHBEARER/MSK settings, no secrets."
  }
}

run "oidc_client_credentials" {
  variables {
    kafka_sasl_mechanism       = "oauthbearer"
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
    kafka_sasl_mechanism = "oauthbearer"
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
    kafka_sasl_mechanism = "aws-msk-iam"
    kafka_aws_region     = "eu-west-1"
    kafka_aws_role_arn   = "arn:aws:iam::123456789012:role/ehmirror-msk"
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
    kafka_sasl_mechanism        = "aws-msk-iam"
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

# The token mechanisms take no user or password: none is stored, even when
# set (a CI job that always exports TF_VAR_kafka_sasl_password), and the
# mechanism reaches the handler through KAFKA_SASL_MECHANISM as the password
# mechanisms' does.
run "token_mechanism_stores_no_sasl_password" {
  variables {
    kafka_sasl_mechanism = "oauthbearer"
    kafka_sasl_username  = "u"
    kafka_sasl_password  = "p-do-not-store"
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "oauthbearer" &&
      length(azurerm_key_vault_secret.kafka) == 0 &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_USERNAME") &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_PASSWORD")
    )
    error_message = "oauthbearer must store no SASL user or password and set no KAFKA_SASL_USERNAME/PASSWORD."
  }
}

run "password_mechanisms_store_user_and_password" {
  variables {
    kafka_sasl_mechanism = "scram-sha-256"
    kafka_sasl_username  = "u"
    kafka_sasl_password  = "p"
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "scram-sha-256" &&
      sort(keys(azurerm_key_vault_secret.kafka)) == tolist(["KAFKA_SASL_PASSWORD", "KAFKA_SASL_USERNAME"]) &&
      length(azurerm_key_vault_secret.kafka_sasl_token) == 0
    )
    error_message = "scram-sha-256 must store the user and password, and no token secret."
  }
}

run "password_mechanism_needs_a_password" {
  command = plan

  variables {
    kafka_sasl_mechanism = "plain"
    kafka_sasl_username  = "u"
  }

  expect_failures = [azurerm_key_vault_secret.kafka]
}

# The mistake of a configuration written for kafka_sasl_token_mechanism:
# its OAUTHBEARER settings with kafka_sasl_mechanism still "none".
run "oauth_settings_need_oauthbearer" {
  command = plan

  variables {
    kafka_oauth_token_endpoint = "https://idp.example.com/oauth2/token"
    kafka_oauth_client_id      = "mirror"
    kafka_oauth_client_secret  = "s"
  }

  expect_failures = [terraform_data.kafka_sasl_checks]
}

run "aws_settings_need_aws_msk_iam" {
  command = plan

  variables {
    kafka_sasl_mechanism = "oauthbearer"
    kafka_aws_region     = "eu-west-1"
  }

  expect_failures = [terraform_data.kafka_sasl_checks]
}

run "removed_token_mechanism_variable_fails" {
  command = plan

  variables {
    kafka_sasl_token_mechanism = "oauthbearer"
  }

  expect_failures = [var.kafka_sasl_token_mechanism]
}

run "oidc_needs_a_secret" {
  command = plan

  variables {
    kafka_sasl_mechanism       = "oauthbearer"
    kafka_oauth_token_endpoint = "https://idp.example.com/oauth2/token"
    kafka_oauth_client_id      = "mirror"
  }

  expect_failures = [terraform_data.kafka_sasl_checks]
}

run "msk_needs_role_or_key" {
  command = plan

  variables {
    kafka_sasl_mechanism = "aws-msk-iam"
    kafka_aws_region     = "eu-west-1"
  }

  expect_failures = [terraform_data.kafka_sasl_checks]
}

run "bad_role_arn" {
  command = plan

  variables {
    kafka_sasl_mechanism = "aws-msk-iam"
    kafka_aws_region     = "eu-west-1"
    kafka_aws_role_arn   = "ehmirror-msk"
  }

  expect_failures = [var.kafka_aws_role_arn]
}
