# Every input validation rejects bad input: one run per validation rule
# (several for rules with more than one part), each expecting exactly that
# failure. Cross-variable rules are resource preconditions and are tested
# the same way. Bad values are planned only; nothing is applied.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  # Alerts notify someone (check.alert_targets; monitoring.tftest.hcl
  # tests the warning without a target).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t03"
  kafka_brokers          = ["broker-0.kafka.example.com:9093"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "not-a-real-password"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "valid_boundary_values_are_accepted" {
  command = plan

  variables {
    name_prefix                           = "ab"
    environment                           = "e2e1"
    eventhubs_capacity                    = 40
    eventhubs_auto_inflate_enabled        = true
    eventhubs_maximum_throughput_units    = 40
    capture_interval_in_seconds           = 900
    capture_size_limit_in_bytes           = 524288000
    function_maximum_elastic_worker_count = 100
    mirror_max_duration                   = "0.5s"
    mirror_max_records                    = 0
    mirror_max_bytes                      = 0
    mirror_routes                         = " prod[.](.*)=>mirror.$1 ; ^x$=>y ;"
    kafka_brokers                         = ["[2001:db8::1]:9093", "kafka_0.internal:9092"]
    kafka_topics_exclude                  = "^prod\\.internal\\..*"
    event_hubs = {
      "a"             = { partition_count = 1, message_retention = 1 }
      "prod.test_1-x" = { partition_count = 32, message_retention = 7, consumer_groups = ["cg.1", "cg_2", "x"] }
    }
  }

  assert {
    condition     = length(azurerm_eventhub.this) == 2
    error_message = "Boundary values must be accepted."
  }
}

run "location_rejects_display_name" {
  command = plan

  variables {
    location = "West Europe"
  }

  expect_failures = [var.location]
}

run "existing_resource_group_name_rejects_trailing_dot" {
  command = plan

  variables {
    existing_resource_group_name = "rg-bad."
  }

  expect_failures = [var.existing_resource_group_name]
}

run "name_prefix_rejects_upper_case" {
  command = plan

  variables {
    name_prefix = "EHMirror"
  }

  expect_failures = [var.name_prefix]
}

run "name_prefix_rejects_too_long" {
  command = plan

  variables {
    name_prefix = "ehmirror-too-long"
  }

  expect_failures = [var.name_prefix]
}

run "environment_rejects_hyphen" {
  command = plan

  variables {
    environment = "pre-prod"
  }

  expect_failures = [var.environment]
}

run "name_suffix_rejects_symbols" {
  command = plan

  variables {
    name_suffix = "a_b"
  }

  expect_failures = [var.name_suffix]
}

run "eventhubs_sku_rejects_basic" {
  command = plan

  variables {
    eventhubs_sku = "Basic"
  }

  expect_failures = [var.eventhubs_sku]
}

run "eventhubs_capacity_rejects_zero" {
  command = plan

  variables {
    eventhubs_capacity = 0
  }

  expect_failures = [var.eventhubs_capacity]
}

run "eventhubs_capacity_rejects_41" {
  command = plan

  variables {
    eventhubs_capacity = 41
  }

  expect_failures = [var.eventhubs_capacity]
}

run "eventhubs_maximum_throughput_units_rejects_41" {
  command = plan

  variables {
    eventhubs_maximum_throughput_units = 41
  }

  expect_failures = [var.eventhubs_maximum_throughput_units]
}

run "event_hubs_rejects_empty_map" {
  command = plan

  variables {
    event_hubs = {}
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_name_with_slash" {
  command = plan

  variables {
    event_hubs = { "prod/test1" = {} }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_name_starting_with_dot" {
  command = plan

  variables {
    event_hubs = { ".prod" = {} }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_zero_partitions" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { partition_count = 0 } }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_33_partitions" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { partition_count = 33 } }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_zero_retention" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { message_retention = 0 } }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_91_day_retention" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { message_retention = 91 } }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_bad_consumer_group" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { consumer_groups = ["-bad"] } }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_default_consumer_group" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { consumer_groups = ["$Default"] } }
  }

  expect_failures = [var.event_hubs]
}

run "event_hubs_rejects_duplicate_consumer_groups" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { consumer_groups = ["a1", "a1"] } }
  }

  expect_failures = [var.event_hubs]
}

run "capture_container_name_rejects_upper_case" {
  command = plan

  variables {
    capture_container_name = "Capture"
  }

  expect_failures = [var.capture_container_name]
}

run "capture_container_name_rejects_double_hyphen" {
  command = plan

  variables {
    capture_container_name = "cap--ture"
  }

  expect_failures = [var.capture_container_name]
}

run "capture_interval_rejects_59" {
  command = plan

  variables {
    capture_interval_in_seconds = 59
  }

  expect_failures = [var.capture_interval_in_seconds]
}

run "capture_interval_rejects_901" {
  command = plan

  variables {
    capture_interval_in_seconds = 901
  }

  expect_failures = [var.capture_interval_in_seconds]
}

run "capture_size_limit_rejects_below_10mib" {
  command = plan

  variables {
    capture_size_limit_in_bytes = 10485759
  }

  expect_failures = [var.capture_size_limit_in_bytes]
}

run "capture_size_limit_rejects_above_500mib" {
  command = plan

  variables {
    capture_size_limit_in_bytes = 524288001
  }

  expect_failures = [var.capture_size_limit_in_bytes]
}

run "capture_archive_name_format_rejects_missing_token" {
  command = plan

  variables {
    capture_archive_name_format = "{Namespace}/{EventHub}/{PartitionId}/{Year}/{Month}/{Day}/{Hour}/{Minute}"
  }

  expect_failures = [var.capture_archive_name_format]
}

run "capture_storage_replication_type_rejects_unknown" {
  command = plan

  variables {
    capture_storage_replication_type = "XRS"
  }

  expect_failures = [var.capture_storage_replication_type]
}

run "function_plan_sku_rejects_consumption" {
  command = plan

  variables {
    function_plan_sku = "Y1"
  }

  expect_failures = [var.function_plan_sku]
}

run "function_maximum_elastic_worker_count_rejects_zero" {
  command = plan

  variables {
    function_maximum_elastic_worker_count = 0
  }

  expect_failures = [var.function_maximum_elastic_worker_count]
}

run "function_storage_replication_type_rejects_unknown" {
  command = plan

  variables {
    function_storage_replication_type = "premium"
  }

  expect_failures = [var.function_storage_replication_type]
}

run "vnet_integration_subnet_id_rejects_vnet_id" {
  command = plan

  variables {
    vnet_integration_subnet_id = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"
  }

  expect_failures = [var.vnet_integration_subnet_id]
}

run "log_analytics_retention_rejects_7_days" {
  command = plan

  variables {
    log_analytics_retention_in_days = 7
  }

  expect_failures = [var.log_analytics_retention_in_days]
}

run "additional_app_settings_rejects_worker_runtime" {
  command = plan

  variables {
    additional_app_settings = { FUNCTIONS_WORKER_RUNTIME = "custom" }
  }

  expect_failures = [var.additional_app_settings]
}

run "additional_app_settings_rejects_plain_kafka_password" {
  command = plan

  variables {
    additional_app_settings = { KAFKA_SASL_PASSWORD = "plain-text" }
  }

  expect_failures = [var.additional_app_settings]
}

run "kafka_brokers_rejects_empty_list" {
  command = plan

  variables {
    kafka_brokers = []
  }

  expect_failures = [var.kafka_brokers]
}

run "kafka_brokers_rejects_missing_port" {
  command = plan

  variables {
    kafka_brokers = ["broker-0.kafka.example.com"]
  }

  expect_failures = [var.kafka_brokers]
}

run "kafka_brokers_rejects_url" {
  command = plan

  variables {
    kafka_brokers = ["sasl_ssl://broker:9093"]
  }

  expect_failures = [var.kafka_brokers]
}

run "kafka_group_rejects_space" {
  command = plan

  variables {
    kafka_group = "my group"
  }

  expect_failures = [var.kafka_group]
}

run "kafka_topics_include_rejects_empty" {
  command = plan

  variables {
    kafka_topics_include = ""
  }

  expect_failures = [var.kafka_topics_include]
}

run "kafka_topics_include_rejects_bad_regex" {
  command = plan

  variables {
    kafka_topics_include = "^prod\\.(.*"
  }

  expect_failures = [var.kafka_topics_include]
}

run "kafka_topics_exclude_rejects_bad_regex" {
  command = plan

  variables {
    kafka_topics_exclude = "[a-"
  }

  expect_failures = [var.kafka_topics_exclude]
}

run "kafka_sasl_mechanism_rejects_gssapi" {
  command = plan

  variables {
    kafka_sasl_mechanism = "gssapi"
  }

  expect_failures = [var.kafka_sasl_mechanism]
}

run "kafka_tls_ca_pem_rejects_non_pem" {
  command = plan

  variables {
    kafka_tls_ca_pem = "not a certificate"
  }

  expect_failures = [var.kafka_tls_ca_pem]
}

run "kafka_start_offset_rejects_unknown" {
  command = plan

  variables {
    kafka_start_offset = "newest"
  }

  expect_failures = [var.kafka_start_offset]
}

run "role_propagation_wait_rejects_missing_unit" {
  command = plan

  variables {
    role_propagation_wait = "120"
  }

  expect_failures = [var.role_propagation_wait]
}

run "mirror_schedule_rejects_empty" {
  command = plan

  variables {
    mirror_schedule = ""
  }

  expect_failures = [var.mirror_schedule]
}

run "mirror_schedule_rejects_five_field_cron" {
  command = plan

  variables {
    mirror_schedule = "*/1 * * * *"
  }

  expect_failures = [var.mirror_schedule]
}

run "mirror_max_records_rejects_negative" {
  command = plan

  variables {
    mirror_max_records = -1
  }

  expect_failures = [var.mirror_max_records]
}

run "mirror_max_records_rejects_fraction" {
  command = plan

  variables {
    mirror_max_records = 2.5
  }

  expect_failures = [var.mirror_max_records]
}

run "mirror_inflight_bytes_rejects_below_1mib" {
  command = plan

  variables {
    mirror_inflight_bytes = 1000
  }

  expect_failures = [var.mirror_inflight_bytes]
}

run "mirror_catchup_max_duration_rejects_bad_duration" {
  command = plan

  variables {
    mirror_catchup_max_duration = "10 minutes"
  }

  expect_failures = [var.mirror_catchup_max_duration]
}

run "mirror_max_bytes_rejects_negative" {
  command = plan

  variables {
    mirror_max_bytes = -1
  }

  expect_failures = [var.mirror_max_bytes]
}

run "mirror_max_duration_rejects_missing_unit" {
  command = plan

  variables {
    mirror_max_duration = "240"
  }

  expect_failures = [var.mirror_max_duration]
}

run "mirror_max_duration_rejects_zero" {
  command = plan

  variables {
    mirror_max_duration = "0s"
  }

  expect_failures = [var.mirror_max_duration]
}

run "mirror_partitioning_rejects_unknown" {
  command = plan

  variables {
    mirror_partitioning = "random"
  }

  expect_failures = [var.mirror_partitioning]
}

run "mirror_routes_rejects_rule_without_arrow" {
  command = plan

  variables {
    mirror_routes = "prod\\..*=mirror"
  }

  expect_failures = [var.mirror_routes]
}

run "mirror_routes_rejects_empty_hub" {
  command = plan

  variables {
    mirror_routes = "prod\\..*=>"
  }

  expect_failures = [var.mirror_routes]
}

run "mirror_routes_rejects_bad_regex" {
  command = plan

  variables {
    mirror_routes = "prod(=>mirror"
  }

  expect_failures = [var.mirror_routes]
}

run "mirror_gap_policy_rejects_unknown" {
  command = plan

  variables {
    mirror_gap_policy = "ignore"
  }

  expect_failures = [var.mirror_gap_policy]
}

run "mirror_oversize_policy_rejects_unknown" {
  command = plan

  variables {
    mirror_oversize_policy = "truncate"
  }

  expect_failures = [var.mirror_oversize_policy]
}

run "standard_rejects_retention_above_7_days" {
  command = plan

  variables {
    event_hubs = { "prod.test1" = { message_retention = 8 } }
  }

  expect_failures = [azurerm_eventhub.this["prod.test1"]]
}

run "standard_rejects_more_than_10_hubs" {
  command = plan

  variables {
    event_hubs = { for i in range(11) : "prod.t${i}" => {} }
  }

  expect_failures = [azurerm_eventhub_namespace.this]
}

run "premium_rejects_3_processing_units" {
  command = plan

  variables {
    eventhubs_sku      = "Premium"
    eventhubs_capacity = 3
  }

  expect_failures = [azurerm_eventhub_namespace.this]
}

run "premium_rejects_auto_inflate" {
  command = plan

  variables {
    eventhubs_sku                  = "Premium"
    eventhubs_auto_inflate_enabled = true
  }

  expect_failures = [azurerm_eventhub_namespace.this]
}

run "auto_inflate_rejects_maximum_below_capacity" {
  command = plan

  variables {
    eventhubs_capacity                 = 4
    eventhubs_auto_inflate_enabled     = true
    eventhubs_maximum_throughput_units = 2
  }

  expect_failures = [azurerm_eventhub_namespace.this]
}

run "sasl_requires_password" {
  command = plan

  variables {
    kafka_sasl_password = null
  }

  expect_failures = [azurerm_key_vault_secret.kafka]
}

run "sasl_requires_username" {
  command = plan

  variables {
    kafka_sasl_mechanism = "plain"
    kafka_sasl_username  = ""
  }

  expect_failures = [azurerm_key_vault_secret.kafka]
}

run "ca_bundle_requires_tls" {
  command = plan

  variables {
    kafka_tls        = false
    kafka_tls_ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
  }

  expect_failures = [azurerm_linux_function_app.this]
}

run "kafka_session_timeout_rejects_below_the_brokers_minimum" {
  command = plan

  variables {
    kafka_session_timeout_seconds = 5
  }

  expect_failures = [var.kafka_session_timeout_seconds]
}

run "kafka_session_timeout_rejects_fractions" {
  command = plan

  variables {
    kafka_session_timeout_seconds = 6.5
  }

  expect_failures = [var.kafka_session_timeout_seconds]
}
