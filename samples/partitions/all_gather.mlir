// RUN: stablehlo-translate --interpret -split-input-file %s
// all_gather on replicas x partitions, in StableHLO's test format (docs/replicas.md)

module @flattened_ids {
  func.func @all_gather(%x : tensor<2xi64>) -> tensor<4xi64> {
    %result = "stablehlo.all_gather"(%x) {
      all_gather_dim = 0 : i64,
      replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>,
      use_global_device_ids
    } : (tensor<2xi64>) -> tensor<4xi64>
    return %result : tensor<4xi64>
  }
  func.func @main() {
    %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
    %1 = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
    %results:2 = "interpreter.run_parallel"(%0, %1) {
      programs = [[@all_gather, @all_gather]]
    } : (tensor<2xi64>, tensor<2xi64>) -> (tensor<4xi64>, tensor<4xi64>)
    check.expect_eq_const %results#0, dense<[3, 4, 1, 2]> : tensor<4xi64>
    check.expect_eq_const %results#1, dense<[3, 4, 1, 2]> : tensor<4xi64>
    func.return
  }
}

// -----

module @cross_replica_and_partition {
  func.func @all_gather(%x : tensor<2xi64>) -> tensor<8xi64> {
    %result = "stablehlo.all_gather"(%x) {
      all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>
    } : (tensor<2xi64>) -> tensor<8xi64>
    return %result : tensor<8xi64>
  }
  func.func @main() {
    %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
    %1 = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
    %2 = stablehlo.constant dense<[5, 6]> : tensor<2xi64>
    %3 = stablehlo.constant dense<[7, 8]> : tensor<2xi64>
    %results:4 = "interpreter.run_parallel"(%0, %1, %2, %3) {
      programs = [[@all_gather, @all_gather], [@all_gather, @all_gather]]
    } : (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) ->
        (tensor<8xi64>, tensor<8xi64>, tensor<8xi64>, tensor<8xi64>)
    // the spec's process group: partitions outer, the group's replicas inner
    check.expect_eq_const %results#0, dense<[1, 2, 5, 6, 3, 4, 7, 8]> : tensor<8xi64>
    check.expect_eq_const %results#1, dense<[1, 2, 5, 6, 3, 4, 7, 8]> : tensor<8xi64>
    check.expect_eq_const %results#2, dense<[1, 2, 5, 6, 3, 4, 7, 8]> : tensor<8xi64>
    check.expect_eq_const %results#3, dense<[1, 2, 5, 6, 3, 4, 7, 8]> : tensor<8xi64>
    func.return
  }
}
