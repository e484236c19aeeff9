###############################################################################
# Placement, naming and tags
###############################################################################

variable "location" {
  description = "Azure region for every resource, e.g. \"westeurope\". Use the region of your Kafka cluster to keep the mirror's reads local."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9]+$", var.location))
    error_message = "location must be an Azure region name in lower case without spaces, e.g. \"westeurope\"."
  }
}

variable "existing_resource_group_name" {
  description = "Name of an existing resource group to deploy into. Leave null to create a new one named rg-<name_prefix>-<environment>."
  type        = string
  default     = null

  validation {
    condition     = var.existing_resource_group_name == null || can(regex("^[-\\w\\.\\(\\)]{1,89}[-\\w\\(\\)]$", var.existing_resource_group_name))
    error_message = "existing_resource_group_name must be 1-90 characters of letters, digits, '-', '_', '.', '(' or ')', and must not end with '.'."
  }
}

variable "name_prefix" {
  description = "First part of every resource name (lower-case letters, digits and hyphens, 2-12 characters, starting with a letter)."
  type        = string
  default     = "ehmirror"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,10}[a-z0-9]$", var.name_prefix)) && !strcontains(var.name_prefix, "--")
    error_message = "name_prefix must be 2-12 characters of lower-case letters, digits and single hyphens, start with a letter and end with a letter or digit."
  }
}

variable "environment" {
  description = "Environment name used in resource names and the environment tag (lower-case letters and digits, 1-8 characters), e.g. \"prod\"."
  type        = string
  default     = "prod"

  validation {
    condition     = can(regex("^[a-z0-9]{1,8}$", var.environment))
    error_message = "environment must be 1-8 lower-case letters or digits."
  }
}

variable "name_suffix" {
  description = "Suffix that makes the globally unique names (namespace, storage accounts, key vault, function app) unique. Leave empty to derive a stable 6-character suffix from the subscription and resource group."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^[a-z0-9]{0,8}$", var.name_suffix))
    error_message = "name_suffix must be empty or 1-8 lower-case letters or digits."
  }
}

variable "tags" {
  description = "Extra tags for every resource. application, environment and managed-by are always set."
  type        = map(string)
  default     = {}
}

variable "register_resource_providers" {
  description = "Let the azurerm provider register the resource providers this configuration needs (Microsoft.EventHub, Microsoft.Web, ...). Needs */register/action on the subscription; set false when they are already registered."
  type        = bool
  default     = true
}

###############################################################################
# Event Hubs namespace
###############################################################################

variable "eventhubs_sku" {
  description = "Event Hubs namespace tier: Standard or Premium. Basic is rejected because it has neither Capture nor the Kafka endpoint. The tier cannot be changed in place."
  type        = string
  default     = "Standard"

  validation {
    condition     = contains(["Standard", "Premium"], var.eventhubs_sku)
    error_message = "eventhubs_sku must be \"Standard\" or \"Premium\" (Basic has no Capture)."
  }
}

variable "eventhubs_capacity" {
  description = "Throughput units (Standard, 1-40) or processing units (Premium: 1, 2, 4, 8 or 16) of the namespace."
  type        = number
  default     = 1

  validation {
    condition     = var.eventhubs_capacity >= 1 && var.eventhubs_capacity <= 40 && floor(var.eventhubs_capacity) == var.eventhubs_capacity
    error_message = "eventhubs_capacity must be a whole number between 1 and 40."
  }
}

variable "eventhubs_auto_inflate_enabled" {
  description = "Enable auto-inflate (Standard only): the service adds throughput units up to eventhubs_maximum_throughput_units under load. It never scales back down by itself."
  type        = bool
  default     = false
}

variable "eventhubs_maximum_throughput_units" {
  description = "Upper bound for auto-inflate (1-40, at least eventhubs_capacity). Only used when eventhubs_auto_inflate_enabled is true."
  type        = number
  default     = 10

  validation {
    condition     = var.eventhubs_maximum_throughput_units >= 1 && var.eventhubs_maximum_throughput_units <= 40 && floor(var.eventhubs_maximum_throughput_units) == var.eventhubs_maximum_throughput_units
    error_message = "eventhubs_maximum_throughput_units must be a whole number between 1 and 40."
  }
}

variable "eventhubs_local_authentication_enabled" {
  description = "Keep SAS (key) authentication on the namespace. The mirror and Capture use managed identities, so the default is false (keys disabled)."
  type        = bool
  default     = false
}

variable "eventhubs_public_network_access_enabled" {
  description = "Allow access to the namespace from public networks. Null (default) follows restrict_public_network_access: public unless that is on, then private (the app reaches the namespace through its private endpoint)."
  type        = bool
  default     = null
}

variable "event_hubs" {
  description = <<-EOT
    Event hubs to create, keyed by hub name (by default the mirrored Kafka topic's name).
    partition_count: 1-32 (fixed after creation on Standard; pick the Kafka topic's partition count when using MIRROR_PARTITIONING=preserve).
    message_retention: days, 1 by default; at most 7 on Standard, 90 on Premium.
    consumer_groups: extra consumer groups for downstream readers ($Default always exists).
  EOT
  type = map(object({
    partition_count   = optional(number, 4)
    message_retention = optional(number, 1)
    consumer_groups   = optional(list(string), [])
  }))
  default = {
    "prod.test1" = {}
    "prod.test2" = {}
    "prod.test3" = {}
    "prod.test4" = {}
    "prod.test5" = {}
  }

  validation {
    condition     = length(var.event_hubs) >= 1 && length(var.event_hubs) <= 100
    error_message = "event_hubs must contain between 1 and 100 hubs (a Standard namespace allows at most 10)."
  }

  validation {
    condition     = alltrue([for name in keys(var.event_hubs) : can(regex("^[a-zA-Z0-9]([-._a-zA-Z0-9]{0,254}[a-zA-Z0-9])?$", name))])
    error_message = "Every event hub name must be 1-256 characters of letters, digits, '.', '-' or '_', and begin and end with a letter or digit."
  }

  validation {
    condition     = alltrue([for hub in values(var.event_hubs) : hub.partition_count >= 1 && hub.partition_count <= 32 && floor(hub.partition_count) == hub.partition_count])
    error_message = "Every event hub's partition_count must be a whole number between 1 and 32."
  }

  validation {
    condition     = alltrue([for hub in values(var.event_hubs) : hub.message_retention >= 1 && hub.message_retention <= 90 && floor(hub.message_retention) == hub.message_retention])
    error_message = "Every event hub's message_retention must be a whole number of days between 1 and 90 (at most 7 on Standard)."
  }

  validation {
    condition = alltrue(flatten([
      for hub in values(var.event_hubs) : [
        for cg in hub.consumer_groups : can(regex("^[a-zA-Z0-9]([-._a-zA-Z0-9]{0,48}[a-zA-Z0-9])?$", cg)) && lower(cg) != "$default"
      ]
    ]))
    error_message = "Consumer group names must be 1-50 characters of letters, digits, '.', '-' or '_', begin and end with a letter or digit, and not be $Default."
  }

  validation {
    condition     = alltrue([for hub in values(var.event_hubs) : length(hub.consumer_groups) == length(distinct(hub.consumer_groups)) && length(hub.consumer_groups) <= 19])
    error_message = "Each event hub's consumer_groups must be unique and at most 19 (20 per hub on Standard, including $Default)."
  }
}

###############################################################################
# Capture
###############################################################################

variable "capture_container_name" {
  description = "Blob container that receives the Capture (Avro) files of every hub."
  type        = string
  default     = "capture"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.capture_container_name)) && !strcontains(var.capture_container_name, "--")
    error_message = "capture_container_name must be 3-63 characters of lower-case letters, digits and single hyphens, beginning and ending with a letter or digit."
  }
}

variable "capture_interval_in_seconds" {
  description = "Capture time window in seconds (60-900): a file is written per partition at least this often."
  type        = number
  default     = 300

  validation {
    condition     = var.capture_interval_in_seconds >= 60 && var.capture_interval_in_seconds <= 900 && floor(var.capture_interval_in_seconds) == var.capture_interval_in_seconds
    error_message = "capture_interval_in_seconds must be a whole number between 60 and 900."
  }
}

variable "capture_size_limit_in_bytes" {
  description = "Capture size window in bytes (10485760-524288000): a file is written per partition when this much data has arrived, if that comes before the time window."
  type        = number
  default     = 314572800

  validation {
    condition     = var.capture_size_limit_in_bytes >= 10485760 && var.capture_size_limit_in_bytes <= 524288000 && floor(var.capture_size_limit_in_bytes) == var.capture_size_limit_in_bytes
    error_message = "capture_size_limit_in_bytes must be a whole number between 10485760 (10 MiB) and 524288000 (500 MiB)."
  }
}

variable "capture_skip_empty_archives" {
  description = "Do not write empty Avro files for windows without events."
  type        = bool
  default     = true
}

variable "capture_archive_name_format" {
  description = "Blob name format of Capture files. Must contain all nine tokens {Namespace} {EventHub} {PartitionId} {Year} {Month} {Day} {Hour} {Minute} {Second}, in any order."
  type        = string
  default     = "{Namespace}/{EventHub}/{PartitionId}/{Year}/{Month}/{Day}/{Hour}/{Minute}/{Second}"

  validation {
    condition = alltrue([
      for token in ["{Namespace}", "{EventHub}", "{PartitionId}", "{Year}", "{Month}", "{Day}", "{Hour}", "{Minute}", "{Second}"] :
      strcontains(var.capture_archive_name_format, token)
    ])
    error_message = "capture_archive_name_format must contain all of {Namespace}, {EventHub}, {PartitionId}, {Year}, {Month}, {Day}, {Hour}, {Minute} and {Second}."
  }
}

variable "capture_storage_replication_type" {
  description = "Replication of the Capture storage account (Standard tier; Premium storage is not supported by Capture)."
  type        = string
  default     = "LRS"

  validation {
    condition     = contains(["LRS", "ZRS", "GRS", "RAGRS", "GZRS", "RAGZRS"], var.capture_storage_replication_type)
    error_message = "capture_storage_replication_type must be one of LRS, ZRS, GRS, RAGRS, GZRS, RAGZRS."
  }
}

variable "grant_deployer_capture_access" {
  description = "Grant each of deployer_object_ids Storage Blob Data Contributor on the Capture storage account; enabling or updating Capture checks that the caller may write the container. Set false if they already hold such a role there (a duplicate assignment fails)."
  type        = bool
  default     = true
}

###############################################################################
# Function app (hosting)
###############################################################################

variable "function_plan_sku" {
  description = "Elastic Premium plan SKU for the function app: EP1, EP2 or EP3."
  type        = string
  default     = "EP1"

  validation {
    condition     = contains(["EP1", "EP2", "EP3"], var.function_plan_sku)
    error_message = "function_plan_sku must be EP1, EP2 or EP3 (Linux Elastic Premium)."
  }
}

variable "function_maximum_elastic_worker_count" {
  description = "Maximum burst (instances) of the Elastic Premium plan, 1-100. The timer drain runs on one instance at a time, so 1-3 is plenty."
  type        = number
  default     = 3

  validation {
    condition     = var.function_maximum_elastic_worker_count >= 1 && var.function_maximum_elastic_worker_count <= 100 && floor(var.function_maximum_elastic_worker_count) == var.function_maximum_elastic_worker_count
    error_message = "function_maximum_elastic_worker_count must be a whole number between 1 and 100."
  }
}

variable "instances" {
  description = "Function apps to run, 1-10, all in one Kafka consumer group (KAFKA_GROUP): the group spreads the topics' partitions over their drains, and each app's timer runs one drain at a time. More apps than partitions leave some idle. Each app has its own name (<name>, <name>-2, ...) and Functions host ID; the identity, its roles, the package and the plan are shared."
  type        = number
  default     = 1

  validation {
    condition     = var.instances >= 1 && var.instances <= 10 && floor(var.instances) == var.instances
    error_message = "instances must be a whole number between 1 and 10."
  }
}

variable "function_storage_replication_type" {
  description = "Replication of the function app's own storage account (AzureWebJobsStorage, the function package)."
  type        = string
  default     = "LRS"

  validation {
    condition     = contains(["LRS", "ZRS", "GRS", "RAGRS", "GZRS", "RAGZRS"], var.function_storage_replication_type)
    error_message = "function_storage_replication_type must be one of LRS, ZRS, GRS, RAGRS, GZRS, RAGZRS."
  }
}

variable "vnet_integration_subnet_id" {
  description = "Resource ID of a subnet (delegated to Microsoft.Web/serverFarms) for regional VNet integration, to reach a private Kafka. Null disables VNet integration."
  type        = string
  default     = null

  validation {
    condition     = var.vnet_integration_subnet_id == null || can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.Network/virtualNetworks/[^/]+/subnets/[^/]+$", var.vnet_integration_subnet_id))
    error_message = "vnet_integration_subnet_id must be null or a subnet resource ID: /subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>."
  }
}

variable "vnet_route_all_enabled" {
  description = "With VNet integration, route all outbound traffic (not only private ranges) through the VNet."
  type        = bool
  default     = true
}

variable "log_analytics_retention_in_days" {
  description = "Retention of the Log Analytics workspace behind Application Insights (30-730 days)."
  type        = number
  default     = 30

  validation {
    condition     = var.log_analytics_retention_in_days >= 30 && var.log_analytics_retention_in_days <= 730
    error_message = "log_analytics_retention_in_days must be between 30 and 730."
  }
}

variable "key_vault_purge_protection_enabled" {
  description = "Enable purge protection on the Key Vault holding the Kafka credentials. Once on it cannot be turned off, and the vault name stays reserved for the retention period after deletion."
  type        = bool
  default     = false
}

variable "grant_deployer_key_vault_access" {
  description = "Grant each of deployer_object_ids Key Vault Secrets Officer on the vault so it can write the Kafka secrets. Set false if they already hold a role there that allows it (a duplicate assignment fails)."
  type        = bool
  default     = true
}

variable "deployer_object_ids" {
  description = "Entra ID object IDs of every principal that runs the deployment: the people who run make deploy and the pipeline's service principal (or managed identity). Each gets Key Vault Secrets Officer on the vault (writes the Kafka secrets, and every plan reads them), Storage Blob Data Contributor on the package container (scripts/deploy.sh uploads the function package) and, with grant_deployer_capture_access, on the Capture account. Independent of who runs terraform: a pipeline that takes over from a person already holds its roles. A person: az ad signed-in-user show --query id -o tsv; a service principal: az ad sp show --id <client id> --query id -o tsv."
  type        = list(string)

  validation {
    condition     = length(var.deployer_object_ids) > 0 && alltrue([for id in var.deployer_object_ids : can(regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", id))])
    error_message = "deployer_object_ids must list at least one Entra ID object ID (a GUID): yours (az ad signed-in-user show --query id -o tsv) and the pipeline's (az ad sp show --id <client id> --query id -o tsv)."
  }
}

variable "key_vault_secrets_version" {
  description = "Version of the Kafka secrets written to Key Vault. The secrets are write-only (value_wo: never in the state or the plan), so Terraform cannot see a changed value: raise this number by one whenever a secret's value changes (rotation), and the next apply writes every secret again as a new version."
  type        = number
  default     = 1

  validation {
    condition     = var.key_vault_secrets_version >= 1 && floor(var.key_vault_secrets_version) == var.key_vault_secrets_version
    error_message = "key_vault_secrets_version must be a whole number >= 1; raise it by one to write changed secret values."
  }
}

variable "role_propagation_wait" {
  description = "How long to wait after creating role assignments before using them (writing the Kafka secrets, enabling Capture, starting the function app), as a duration such as \"120s\" or \"3m\". Azure RBAC can take minutes to take effect and a 403 is not retried, so a first apply on a fresh subscription needs this wait."
  type        = string
  default     = "120s"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(s|m|h))+$", var.role_propagation_wait))
    error_message = "role_propagation_wait must be a duration such as \"120s\", \"3m\" or \"0s\" (units s, m, h)."
  }
}

variable "additional_app_settings" {
  description = "Extra app settings for the function app (e.g. OTEL_EXPORTER_OTLP_*, WEBSITE_DNS_SERVER). Must not contain settings this module owns: every handler setting (KAFKA_*, EVENTHUBS, EVENTHUBS__*, MIRROR_*, CUTOVER_*; each has its own variable), AzureWebJobsStorage*, WEBSITE_RUN_FROM_PACKAGE* and the content share settings, FUNCTIONS_WORKER_RUNTIME."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([
      for k in keys(var.additional_app_settings) :
      !can(regex("^(KAFKA_|EVENTHUBS$|EVENTHUBS__|MIRROR_|CUTOVER_|AzureWebJobsStorage|WEBSITE_CONTENT|WEBSITE_RUN_FROM_PACKAGE|AzureFunctionsWebHost__hostid)", k)) && !contains(["FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_EXTENSION_VERSION", "WEBSITE_SKIP_CONTENTSHARE_VALIDATION"], k)
    ])
    error_message = "additional_app_settings must not set KAFKA_*, EVENTHUBS, EVENTHUBS__*, MIRROR_*, CUTOVER_* (each of the handler's settings has its own variable; EVENTHUBS, a connection string, is not used: the app reaches Event Hubs with its identity), AzureWebJobsStorage*, WEBSITE_CONTENT* (a content share: the app runs without Azure Files), WEBSITE_RUN_FROM_PACKAGE*, WEBSITE_SKIP_CONTENTSHARE_VALIDATION, AzureFunctionsWebHost__hostid, FUNCTIONS_WORKER_RUNTIME or FUNCTIONS_EXTENSION_VERSION; the module sets them."
  }
}

###############################################################################
# Kafka source (app settings KAFKA_*)
###############################################################################

variable "kafka_brokers" {
  description = "Kafka bootstrap brokers as host:port (KAFKA_BROKERS, joined with commas)."
  type        = list(string)

  validation {
    condition     = length(var.kafka_brokers) >= 1 && alltrue([for b in var.kafka_brokers : can(regex("^[A-Za-z0-9._\\[\\]:-]+:[0-9]{1,5}$", b))])
    error_message = "kafka_brokers must list at least one broker, each as host:port (no scheme, no spaces)."
  }
}

variable "kafka_group" {
  description = "Kafka consumer group whose committed offsets track the mirror's position (KAFKA_GROUP)."
  type        = string
  default     = "ehmirror"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]{1,249}$", var.kafka_group))
    error_message = "kafka_group must be 1-249 characters of letters, digits, '.', '_' or '-'."
  }
}

variable "kafka_topics_include" {
  description = "Regular expression (RE2) selecting the Kafka topics to mirror (KAFKA_TOPICS_INCLUDE)."
  type        = string
  default     = "^prod\\..*"

  validation {
    condition     = length(var.kafka_topics_include) > 0 && can(regexall(var.kafka_topics_include, ""))
    error_message = "kafka_topics_include must be a non-empty, valid RE2 regular expression."
  }
}

variable "kafka_topics_exclude" {
  description = "Regular expression (RE2) of topics never to mirror, applied after the include pattern (KAFKA_TOPICS_EXCLUDE). Empty excludes nothing beyond Kafka's internal topics."
  type        = string
  default     = ""

  validation {
    condition     = var.kafka_topics_exclude == "" || can(regexall(var.kafka_topics_exclude, ""))
    error_message = "kafka_topics_exclude must be empty or a valid RE2 regular expression."
  }
}

variable "kafka_tls" {
  description = "Connect to Kafka over TLS (KAFKA_TLS)."
  type        = bool
  default     = true
}

variable "kafka_tls_ca_pem" {
  description = "Optional PEM bundle of the CA that signed the brokers' certificates (when not publicly trusted). Stored as a Key Vault secret and referenced from KAFKA_TLS_CA_PEM. Null uses the system roots."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.kafka_tls_ca_pem == null || strcontains(coalesce(var.kafka_tls_ca_pem, "-"), "-----BEGIN CERTIFICATE-----")
    error_message = "kafka_tls_ca_pem must be null or a PEM bundle containing at least one -----BEGIN CERTIFICATE----- block."
  }
}

variable "kafka_tls_insecure_skip_verify" {
  description = "Do not verify the brokers' TLS certificates (KAFKA_TLS_INSECURE_SKIP_VERIFY). For tests only; use kafka_tls_ca_pem for a private CA instead."
  type        = bool
  default     = false
}

variable "kafka_session_timeout_seconds" {
  description = "KAFKA_SESSION_TIMEOUT in seconds: how long the group coordinator waits for the mirror's heartbeats before it gives its partitions to another member. Longer rides out stalls; shorter hands a killed instance's partitions over sooner. Brokers accept 6 to 1800 by default (group.min/max.session.timeout.ms)."
  type        = number
  default     = 30

  validation {
    condition     = var.kafka_session_timeout_seconds >= 6 && var.kafka_session_timeout_seconds <= 1800 && floor(var.kafka_session_timeout_seconds) == var.kafka_session_timeout_seconds
    error_message = "kafka_session_timeout_seconds must be a whole number from 6 to 1800 (the brokers' default group.min/max.session.timeout.ms)."
  }
}

variable "kafka_start_offset" {
  description = "Where a partition without a committed offset starts (KAFKA_START_OFFSET): earliest or latest."
  type        = string
  default     = "earliest"

  validation {
    condition     = contains(["earliest", "latest"], var.kafka_start_offset)
    error_message = "kafka_start_offset must be \"earliest\" or \"latest\"."
  }
}

###############################################################################
# Mirror behaviour (app settings MIRROR_*)
###############################################################################

variable "mirror_schedule" {
  description = "NCRONTAB schedule of the timer drain, six fields with seconds (MIRROR_SCHEDULE). Default: every minute."
  type        = string
  default     = "0 */1 * * * *"

  validation {
    condition     = length(regexall("[^\\s]+", var.mirror_schedule)) == 6
    error_message = "mirror_schedule must be a non-empty NCRONTAB expression with six fields: {second} {minute} {hour} {day} {month} {day-of-week}, e.g. \"0 */1 * * * *\"."
  }
}

variable "mirror_max_records" {
  description = "Maximum records per drain (MIRROR_MAX_RECORDS); 0 means no bound."
  type        = number
  default     = 1000000

  validation {
    condition     = var.mirror_max_records >= 0 && floor(var.mirror_max_records) == var.mirror_max_records
    error_message = "mirror_max_records must be a whole number >= 0 (0 means no bound)."
  }
}

variable "mirror_max_bytes" {
  description = "Maximum record bytes per drain (MIRROR_MAX_BYTES); 0 means no bound. Default 512 MiB."
  type        = number
  default     = 536870912

  validation {
    condition     = var.mirror_max_bytes >= 0 && floor(var.mirror_max_bytes) == var.mirror_max_bytes
    error_message = "mirror_max_bytes must be a whole number of bytes >= 0 (0 means no bound)."
  }
}

variable "mirror_inflight_bytes" {
  description = "Bytes of records read from Kafka but not yet acknowledged by Event Hubs, at most (MIRROR_INFLIGHT_BYTES). Default 64 MiB."
  type        = number
  default     = 67108864

  validation {
    condition     = var.mirror_inflight_bytes >= 1048576 && floor(var.mirror_inflight_bytes) == var.mirror_inflight_bytes
    error_message = "mirror_inflight_bytes must be a whole number of bytes, at least 1048576 (1 MiB, one Event Hubs batch)."
  }
}

variable "mirror_max_duration" {
  description = "Maximum duration of one timer drain as a Go duration, e.g. \"4m\" or \"90s\" (MIRROR_MAX_DURATION). The handler requires at most 80% of host.json's functionTimeout (10 minutes: at most 8m)."
  type        = string
  default     = "4m"

  validation {
    condition     = can(regex(local.go_duration, var.mirror_max_duration)) && length(regexall("[1-9]", var.mirror_max_duration)) > 0
    error_message = "mirror_max_duration must be a positive Go duration such as \"4m\", \"90s\" or \"1m30s\"."
  }
}

variable "mirror_catchup_max_duration" {
  description = "Longest a catch-up started through POST /api/catchup may run, as a Go duration (MIRROR_CATCHUP_MAX_DURATION)."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex(local.go_duration, var.mirror_catchup_max_duration)) && length(regexall("[1-9]", var.mirror_catchup_max_duration)) > 0
    error_message = "mirror_catchup_max_duration must be a positive Go duration such as \"10m\" or \"1h\"."
  }
}

variable "mirror_partitioning" {
  description = "How records are spread over Event Hubs partitions (MIRROR_PARTITIONING): hash, kafka-murmur2, preserve or round-robin."
  type        = string
  default     = "hash"

  validation {
    condition     = contains(["hash", "kafka-murmur2", "preserve", "round-robin"], var.mirror_partitioning)
    error_message = "mirror_partitioning must be one of hash, kafka-murmur2, preserve, round-robin."
  }
}

variable "mirror_routes" {
  description = "Optional topic-to-hub rules (MIRROR_ROUTES): REGEX=>HUB separated by ';'. Patterns match whole topic names; the hub is a template with $1 or $${name} from the match, e.g. \"prod[.](.*)=>mirror.$1\". Empty: each topic goes to the hub of the same name."
  type        = string
  default     = ""

  validation {
    condition = alltrue([
      for rule in [for r in split(";", var.mirror_routes) : trimspace(r) if trimspace(r) != ""] :
      length(split("=>", rule)) >= 2 &&
      trimspace(split("=>", rule)[0]) != "" &&
      trimspace(join("=>", slice(split("=>", rule), 1, length(split("=>", rule))))) != "" &&
      can(regexall(trimspace(split("=>", rule)[0]), ""))
    ])
    error_message = "mirror_routes must be empty or rules REGEX=>HUB separated by ';', each with a valid RE2 pattern and a non-empty hub."
  }
}

variable "mirror_gap_policy" {
  description = "What to do when retention purged records the mirror never copied (MIRROR_GAP_POLICY): fail or resume-earliest."
  type        = string
  default     = "fail"

  validation {
    condition     = contains(["fail", "resume-earliest"], var.mirror_gap_policy)
    error_message = "mirror_gap_policy must be \"fail\" or \"resume-earliest\"."
  }
}

variable "mirror_oversize_policy" {
  description = "What to do with a record larger than Event Hubs' maximum message size (MIRROR_OVERSIZE_POLICY): fail or skip."
  type        = string
  default     = "fail"

  validation {
    condition     = contains(["fail", "skip"], var.mirror_oversize_policy)
    error_message = "mirror_oversize_policy must be \"fail\" or \"skip\"."
  }
}

variable "mirror_deduplicate" {
  description = "Read events back after an unclean end so that no record is published twice (MIRROR_DEDUPLICATE). Grants the app's identity Azure Event Hubs Data Receiver on the namespace."
  type        = bool
  default     = false
}

variable "mirror_follow" {
  description = "Follow mode (MIRROR_FOLLOW): a scheduled drain, once caught up, keeps following its partitions until shortly before the next tick and hands over to the next invocation, so records arrive within a second instead of at the next tick. false: each drain stops once caught up."
  type        = bool
  default     = true
}
