# Kafka SASL: one variable, kafka_sasl_mechanism, chooses the mechanism
# (KAFKA_SASL_MECHANISM, set on every app in functionapp.tf) and decides
# which other settings it needs:
#   * none: no SASL.
#   * plain, scram-sha-256, scram-sha-512: kafka_sasl_username and
#     kafka_sasl_password, stored as Key Vault secrets (keyvault.tf).
#   * oauthbearer, aws-msk-iam: token-based (issue 23), the modes below.
# Every secret (a SASL password, the OIDC client secret, an AWS secret access
# key or session token) is a Key Vault secret that the app setting references
# with @Microsoft.KeyVault(SecretUri=...); nothing secret is a plain app
# setting. kafka_oauth_* and kafka_aws_* are refused unless the mechanism is
# the one that reads them (terraform_data.kafka_sasl_checks).
#
# Token modes:
#   * oauthbearer with kafka_oauth_token_endpoint: OIDC client credentials
#     (Keycloak, Okta, Confluent Cloud identity pools, ...).
#   * oauthbearer without it: Microsoft Entra ID tokens of the function app's
#     user-assigned identity (the Event Hubs Kafka endpoint, or any broker
#     that trusts Entra ID); the scope defaults to https://<broker>/.default.
#   * aws-msk-iam with kafka_aws_role_arn: no AWS key; the function app's
#     identity gets an Entra ID token for kafka_aws_web_identity_audience and
#     exchanges it with STS AssumeRoleWithWebIdentity for the role, whose
#     trust policy names the Entra tenant's OIDC provider, that audience and
#     the identity's principal id (output kafka_aws_web_identity_subject).
#   * aws-msk-iam with kafka_aws_access_key_id: a key pair from Key Vault.

variable "kafka_sasl_mechanism" {
  description = "SASL mechanism for Kafka (KAFKA_SASL_MECHANISM): none; plain, scram-sha-256 or scram-sha-512 (with kafka_sasl_username and kafka_sasl_password); oauthbearer (kafka_oauth_*); aws-msk-iam (kafka_aws_*)."
  type        = string
  default     = "scram-sha-512"

  validation {
    condition     = contains(["none", "plain", "scram-sha-256", "scram-sha-512", "oauthbearer", "aws-msk-iam"], var.kafka_sasl_mechanism)
    error_message = "kafka_sasl_mechanism must be one of none, plain, scram-sha-256, scram-sha-512, oauthbearer, aws-msk-iam."
  }
}

variable "kafka_sasl_username" {
  description = "Kafka SASL user name. Stored as a Key Vault secret and referenced from KAFKA_SASL_USERNAME; required with kafka_sasl_mechanism plain, scram-sha-256 or scram-sha-512, ignored otherwise."
  type        = string
  default     = null
  sensitive   = true
}

variable "kafka_sasl_password" {
  description = "Kafka SASL password. Stored as a Key Vault secret and referenced from KAFKA_SASL_PASSWORD; required with kafka_sasl_mechanism plain, scram-sha-256 or scram-sha-512, ignored otherwise. Pass it through TF_VAR_kafka_sasl_password, not a file in the repository."
  type        = string
  default     = null
  sensitive   = true
}

# Removed: kafka_sasl_mechanism now takes oauthbearer and aws-msk-iam too. A
# configuration that still sets it fails with what to write instead (an
# undeclared variable in a .tfvars file would only be a warning, and the
# mechanism would silently fall back to kafka_sasl_mechanism's).
variable "kafka_sasl_token_mechanism" {
  description = "Removed: set kafka_sasl_mechanism = \"oauthbearer\" or \"aws-msk-iam\" instead. Any value fails the plan."
  type        = string
  default     = null

  validation {
    condition     = var.kafka_sasl_token_mechanism == null
    error_message = "kafka_sasl_token_mechanism was merged into kafka_sasl_mechanism: remove it and set kafka_sasl_mechanism to its value (oauthbearer or aws-msk-iam; none stays none)."
  }
}

variable "kafka_oauth_token_endpoint" {
  description = "OIDC token endpoint for the client credentials grant (KAFKA_SASL_OAUTH_TOKEN_ENDPOINT). Null: OAUTHBEARER tokens from Microsoft Entra ID for the function app's identity."
  type        = string
  default     = null

  validation {
    condition     = var.kafka_oauth_token_endpoint == null || can(regex("^https?://[^/]+", coalesce(var.kafka_oauth_token_endpoint, "-")))
    error_message = "kafka_oauth_token_endpoint must be null or an http(s) URL."
  }
}

variable "kafka_oauth_client_id" {
  description = "OIDC client id (KAFKA_SASL_OAUTH_CLIENT_ID); required with kafka_oauth_token_endpoint. Ignored otherwise: Entra ID uses the function app's identity."
  type        = string
  default     = null
}

variable "kafka_oauth_client_secret" {
  description = "OIDC client secret. Stored as a Key Vault secret and referenced from KAFKA_SASL_OAUTH_CLIENT_SECRET. Pass it through TF_VAR_kafka_oauth_client_secret."
  type        = string
  default     = null
  sensitive   = true
}

variable "kafka_oauth_scope" {
  description = "Scope of the OAUTHBEARER tokens (KAFKA_SASL_OAUTH_SCOPE); it decides their audience. Null: none for OIDC, https://<broker host>/.default for Entra ID."
  type        = string
  default     = null
}

variable "kafka_oauth_extensions" {
  description = "SASL extensions (KAFKA_SASL_OAUTH_EXTENSIONS), e.g. { logicalCluster = \"lkc-abc12\", identityPoolId = \"pool-Ab1c\" } for Confluent Cloud."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.kafka_oauth_extensions : can(regex("^[A-Za-z]+$", k)) && k != "auth" && !strcontains(v, ",")])
    error_message = "kafka_oauth_extensions keys must be letters only (not auth) and values must not contain commas."
  }
}

variable "kafka_aws_region" {
  description = "AWS region of the MSK cluster (KAFKA_SASL_AWS_REGION); required with aws-msk-iam."
  type        = string
  default     = null

  validation {
    condition     = var.kafka_aws_region == null || can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", coalesce(var.kafka_aws_region, "-")))
    error_message = "kafka_aws_region must be null or an AWS region such as eu-west-1."
  }
}

variable "kafka_aws_role_arn" {
  description = "IAM role the mirror assumes with AssumeRoleWithWebIdentity and an Entra ID token of the function app's identity (KAFKA_SASL_AWS_ROLE_ARN): MSK without a long-lived AWS key."
  type        = string
  default     = null

  validation {
    condition     = var.kafka_aws_role_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/", coalesce(var.kafka_aws_role_arn, "-")))
    error_message = "kafka_aws_role_arn must be null or an IAM role ARN (arn:aws:iam::123456789012:role/NAME)."
  }
}

variable "kafka_aws_web_identity_audience" {
  description = "Audience of the Entra ID token exchanged with STS; the AWS IAM OIDC provider for the tenant and the role's trust policy (aud condition) must name it. KAFKA_SASL_AWS_WEB_IDENTITY_SCOPE is this plus /.default."
  type        = string
  default     = "api://AzureADTokenExchange"
}

variable "kafka_aws_access_key_id" {
  description = "AWS access key id for aws-msk-iam with a key pair instead of a role (KAFKA_SASL_AWS_ACCESS_KEY_ID)."
  type        = string
  default     = null
}

variable "kafka_aws_secret_access_key" {
  description = "Secret of kafka_aws_access_key_id. Stored as a Key Vault secret and referenced from KAFKA_SASL_AWS_SECRET_ACCESS_KEY. Pass it through TF_VAR_kafka_aws_secret_access_key."
  type        = string
  default     = null
  sensitive   = true
}

variable "kafka_aws_session_token" {
  description = "Optional session token of temporary AWS keys; a Key Vault secret referenced from KAFKA_SASL_AWS_SESSION_TOKEN."
  type        = string
  default     = null
  sensitive   = true
}

variable "kafka_aws_sts_endpoint" {
  description = "STS endpoint for the role (KAFKA_SASL_AWS_STS_ENDPOINT), e.g. a VPC endpoint. Null: the regional endpoint."
  type        = string
  default     = null
}

locals {
  kafka_oauth    = var.kafka_sasl_mechanism == "oauthbearer"
  kafka_oidc     = local.kafka_oauth && var.kafka_oauth_token_endpoint != null
  kafka_msk      = var.kafka_sasl_mechanism == "aws-msk-iam"
  kafka_msk_role = local.kafka_msk && var.kafka_aws_role_arn != null

  # kafka_oauth_* and kafka_aws_* that are set (kafka_aws_web_identity_audience
  # has a default and is left out): each is refused with any other mechanism.
  kafka_oauth_settings_set = compact([
    var.kafka_oauth_token_endpoint != null ? "kafka_oauth_token_endpoint" : "",
    var.kafka_oauth_client_id != null ? "kafka_oauth_client_id" : "",
    nonsensitive(var.kafka_oauth_client_secret != null) ? "kafka_oauth_client_secret" : "",
    var.kafka_oauth_scope != null ? "kafka_oauth_scope" : "",
    length(var.kafka_oauth_extensions) > 0 ? "kafka_oauth_extensions" : "",
  ])
  kafka_aws_settings_set = compact([
    var.kafka_aws_region != null ? "kafka_aws_region" : "",
    var.kafka_aws_role_arn != null ? "kafka_aws_role_arn" : "",
    var.kafka_aws_access_key_id != null ? "kafka_aws_access_key_id" : "",
    nonsensitive(var.kafka_aws_secret_access_key != null) ? "kafka_aws_secret_access_key" : "",
    nonsensitive(var.kafka_aws_session_token != null) ? "kafka_aws_session_token" : "",
    var.kafka_aws_sts_endpoint != null ? "kafka_aws_sts_endpoint" : "",
  ])

  # Only non-secret choices (and whether a secret is set) decide which
  # secrets exist (for_each keys known at plan time); a missing secret fails
  # the plan in terraform_data.kafka_sasl_checks.
  kafka_sasl_token_secret_names = merge(
    local.kafka_oidc && nonsensitive(var.kafka_oauth_client_secret != null) ? { KAFKA_SASL_OAUTH_CLIENT_SECRET = "kafka-sasl-oauth-client-secret" } : {},
    local.kafka_msk && !local.kafka_msk_role && nonsensitive(var.kafka_aws_secret_access_key != null) ? { KAFKA_SASL_AWS_SECRET_ACCESS_KEY = "kafka-sasl-aws-secret-access-key" } : {},
    local.kafka_msk && !local.kafka_msk_role && nonsensitive(var.kafka_aws_session_token != null) ? { KAFKA_SASL_AWS_SESSION_TOKEN = "kafka-sasl-aws-session-token" } : {},
  )

  # Merged last into the function app's settings (functionapp.tf), which
  # set KAFKA_SASL_MECHANISM itself for every mechanism.
  kafka_sasl_token_app_settings = !local.kafka_oauth && !local.kafka_msk ? {} : merge(
    local.kafka_oidc ? {
      KAFKA_SASL_OAUTH_TOKEN_ENDPOINT = var.kafka_oauth_token_endpoint
      KAFKA_SASL_OAUTH_CLIENT_ID      = coalesce(var.kafka_oauth_client_id, "-")
    } : {},
    # Entra ID (OAUTHBEARER, or the web identity for MSK): the function
    # app's user-assigned identity.
    (local.kafka_oauth && !local.kafka_oidc) || local.kafka_msk_role ? {
      KAFKA_SASL_OAUTH_CLIENT_ID = azurerm_user_assigned_identity.function_app.client_id
    } : {},
    local.kafka_oauth && var.kafka_oauth_scope != null ? { KAFKA_SASL_OAUTH_SCOPE = var.kafka_oauth_scope } : {},
    local.kafka_oauth && length(var.kafka_oauth_extensions) > 0 ? {
      KAFKA_SASL_OAUTH_EXTENSIONS = join(",", [for k in sort(keys(var.kafka_oauth_extensions)) : "${k}=${var.kafka_oauth_extensions[k]}"])
    } : {},
    local.kafka_msk ? { KAFKA_SASL_AWS_REGION = coalesce(var.kafka_aws_region, "-") } : {},
    local.kafka_msk_role ? {
      KAFKA_SASL_AWS_ROLE_ARN           = var.kafka_aws_role_arn
      KAFKA_SASL_AWS_WEB_IDENTITY_SCOPE = "${var.kafka_aws_web_identity_audience}/.default"
    } : {},
    local.kafka_msk_role && var.kafka_aws_sts_endpoint != null ? { KAFKA_SASL_AWS_STS_ENDPOINT = var.kafka_aws_sts_endpoint } : {},
    local.kafka_msk && !local.kafka_msk_role ? { KAFKA_SASL_AWS_ACCESS_KEY_ID = coalesce(var.kafka_aws_access_key_id, "-") } : {},
    {
      for setting, secret in azurerm_key_vault_secret.kafka_sasl_token :
      setting => "@Microsoft.KeyVault(SecretUri=${secret.versionless_id}/)"
    },
  )
}

resource "azurerm_key_vault_secret" "kafka_sasl_token" {
  for_each = local.kafka_sasl_token_secret_names

  name         = each.value
  key_vault_id = azurerm_key_vault.this.id
  # Write-only (keyvault.tf): in neither the state nor the plan.
  value_wo = lookup({
    KAFKA_SASL_OAUTH_CLIENT_SECRET   = var.kafka_oauth_client_secret
    KAFKA_SASL_AWS_SECRET_ACCESS_KEY = var.kafka_aws_secret_access_key
    KAFKA_SASL_AWS_SESSION_TOKEN     = var.kafka_aws_session_token
  }, each.key)
  value_wo_version = var.key_vault_secrets_version
  content_type     = "text/plain"

  tags = local.tags

  # Written only once the deployer's role has propagated (keyvault.tf).
  depends_on = [time_sleep.deployer_key_vault_secrets]
}

# Combinations the variables' own validations cannot see; the plan fails
# with a message naming the variable. (The user name and password of plain
# and scram-* are checked on their secrets, keyvault.tf.)
resource "terraform_data" "kafka_sasl_checks" {
  input = var.kafka_sasl_mechanism

  lifecycle {
    precondition {
      condition     = local.kafka_oauth || length(local.kafka_oauth_settings_set) == 0
      error_message = "${join(", ", local.kafka_oauth_settings_set)} only apply to kafka_sasl_mechanism = \"oauthbearer\", but kafka_sasl_mechanism is \"${var.kafka_sasl_mechanism}\": set kafka_sasl_mechanism = \"oauthbearer\" or remove them."
    }
    precondition {
      condition     = local.kafka_msk || length(local.kafka_aws_settings_set) == 0
      error_message = "${join(", ", local.kafka_aws_settings_set)} only apply to kafka_sasl_mechanism = \"aws-msk-iam\", but kafka_sasl_mechanism is \"${var.kafka_sasl_mechanism}\": set kafka_sasl_mechanism = \"aws-msk-iam\" or remove them."
    }
    precondition {
      condition     = !local.kafka_oidc || (var.kafka_oauth_client_id != null && nonsensitive(var.kafka_oauth_client_secret != null))
      error_message = "kafka_sasl_mechanism = \"oauthbearer\" with kafka_oauth_token_endpoint needs kafka_oauth_client_id and kafka_oauth_client_secret."
    }
    precondition {
      condition     = !local.kafka_msk || var.kafka_aws_region != null
      error_message = "kafka_sasl_mechanism = \"aws-msk-iam\" needs kafka_aws_region."
    }
    precondition {
      condition     = !local.kafka_msk || ((var.kafka_aws_role_arn != null) != (var.kafka_aws_access_key_id != null))
      error_message = "kafka_sasl_mechanism = \"aws-msk-iam\" needs exactly one of kafka_aws_role_arn (no AWS key) or kafka_aws_access_key_id."
    }
    precondition {
      condition     = !local.kafka_msk || local.kafka_msk_role || nonsensitive(var.kafka_aws_secret_access_key != null)
      error_message = "kafka_aws_access_key_id needs kafka_aws_secret_access_key."
    }
  }
}

# The checks had count = 1 only with a token mechanism.
moved {
  from = terraform_data.kafka_sasl_token_checks[0]
  to   = terraform_data.kafka_sasl_checks
}

output "kafka_aws_web_identity_subject" {
  description = "For the MSK role's trust policy: the sub claim of the function app identity's Entra ID tokens (its principal id)."
  value       = azurerm_user_assigned_identity.function_app.principal_id
}
