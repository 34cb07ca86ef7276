# Test tiers of the GoogleTest cases: ctest includes this file after the
# lists gtest_discover_tests wrote (tessel_tests_TESTS, tessel_layout_tests_TESTS)
# and gives every discovered test its labels:
#   fast   a few seconds at most; the whole tier runs in under 60 s on 2 cores
#   slow   everything else (matches a pattern below)
#   mpi    runs mpirun (all of tessel_layout_tests, and the patterns below)
#   asan   also run by the sanitizer phase of scripts/test.sh (the slow
#          checkpoint fuzz test, a data=2,model=2 layout case and a pipe=2
#          pipeline under mpirun)
#   noasan a fast case the sanitizer phase leaves out (TESSEL_NOT_ASAN below)
# Tests added with add_test get their labels in CMakeLists.txt. A case of
# tessel_tests is fast unless listed in TESSEL_SLOW (a new test that takes
# longer belongs there); a case of tessel_layout_tests is slow unless listed in
# TESSEL_FAST_LAYOUT.
# Patterns are regular expressions over the full test name (parameterized
# tests read Prefix/Suite.Name/Param followed by "  # GetParam() = ...", so
# end such a pattern with "( |$)", not "$"). Seconds after each pattern: one
# run of the Release build alone, on the 2-core machine under about 4x load from
# other builds (the 87 s learning test took 365 s), so about a quarter of that
# on an idle machine. Fast means under about 12 s there (3 s idle).

set(TESSEL_SLOW
    "^Training\\.SmallGptBeatsUnigramEntropyOnFortunes$"             # 365 s
    "^Training\\.SelectiveAndGroupedRecomputationAreBitwiseIdentical$" # 80 s
    "^CalibrateCli\\.QuickWritesAValidProfile$"                      # 64 s
    "^HardenedReaders\\.MutationFuzzOverCheckpointFiles$"            # 40 s
    "^Training\\.SameSeedGivesBitwiseIdenticalLosses$"                # 29 s
    "^Training\\.MlpLearnsFashionMnist$"                              # 28 s
    "^Training\\.BlockRecomputationIsBitwiseIdenticalAndSmaller$"     # 24 s
    "^Llama\\.SmallLlamaLossFallsBelowTheUnigramEntropy$"            # 27 s (the GPT's twin: 19 s then)
)

# Cases in tessel_tests that launch mpirun themselves.
set(TESSEL_MPI
    "^CalibrateCli\\.QuickWritesAValidProfile$"
    "^Cli\\.DefaultThreadsUnderMpirunShareTheHostsCores$"
)

# tessel_layout_tests: each case trains under mpirun and again in one
# process, 7-200 s under that load, so the cases are slow unless listed here
# (one tensor-parallel and one data-parallel check of layout invariance, and an
# error path), which keeps a layout check in the edit-compile-test loop.
set(TESSEL_FAST_LAYOUT
    "^LayoutInvariance\\.MlpTensorParallel$"                          # 11 s
    "^LayoutInvariance\\.GptWithDropoutDataParallel$"                 # 7 s
    "^LayoutInvariance\\.ResumeAutoWithoutACheckpointNamesTheDirectory$" # 0.4 s
    "^TokenDataResume\\.DataTwoResumesOnDataFourAndOneProcessWithTheSameSamples$" # 2.3 s
    "^StagedCollectives\\.BadSettingsFailByName$"                    # 4 s
)

# The sanitizer phase runs the fast tier and these: the hardened readers'
# checkpoint fuzz test, and under mpirun the GPT on data=2,model=2 (4 ranks:
# tensor-parallel collectives and the data-parallel bucketed all-reduce) and
# a 1F1B pipeline on pipe=2 (point-to-point sends of activations and
# gradients), and both again with staged collectives (pinned staging and
# transfer mirrors). The fast tier already holds mpirun cases (the communicator
# tests on 1-8 ranks, the fault scripts, MLP tensor parallel, GPT data
# parallel with dropout).
set(TESSEL_ASAN
    "^HardenedReaders\\.MutationFuzzOverCheckpointFiles$"
    "^Meshes/GptLayouts\\.MatchesSingleProcess/data2_model2( |$)"
    "^Schedules/PipelineSchedules\\.MatchSingleProcess/1f1b_pipe2( |$)"
    "^StagedCollectives\\.FourRanksMatchOneProcessWithTheStagingPredicted$"
)

# Fast-tier cases the sanitizer phase leaves out (label `noasan`): the
# planner's exhaustive searches, run to check that the two-phase search ranks
# the same top plans. Pure computation over the planner's own containers, a
# few seconds in Release but minutes each under ASan+UBSan (the eight-rank
# GPT search: 3.2 s Release, 299 s under the sanitizers at load 7 on 2
# cores), which CI's 30 minutes cannot hold. The smaller searches of
# TwoPhaseSearch and every other planner test stay in the phase.
set(TESSEL_NOT_ASAN
    "^TwoPhaseSearch\\.GptBenchOnEightRanksRanksTheTopPlansAsTheExhaustiveSearch$"
    "^TwoPhaseSearch\\.EightRanksOverTwoNodesRanksTheTopPlansAsTheExhaustiveSearch$"
    "^TwoPhaseSearch\\.ScreeningEstimatesAreCloseToTheExactPredictionsAndBoundedBelow$"
    "^TwoPhaseSearch\\.TheSearchGoesOnUntilPlansFitTheMemoryLimit$"
    "^TwoPhaseSearch\\.ScreeningIsAsCloseWithOffload$"
    "^TwoPhaseSearch\\.OffloadIsSearchedWhenNothingFitsWithoutIt$"
    "^TwoPhaseSearch\\.HostMemoryBoundsTheOffloadingPlans$"
)

function(tessel_matches name patterns out)
  set(hit FALSE)
  foreach(p IN LISTS ${patterns})
    if(name MATCHES "${p}")
      set(hit TRUE)
    endif()
  endforeach()
  set(${out} ${hit} PARENT_SCOPE)
endfunction()

# tessel_label_tests(TESTS ALWAYS FAST_LIST): with FAST_LIST, a test is slow
# unless it matches FAST_LIST; without, fast unless it matches TESSEL_SLOW.
function(tessel_label_tests tests always fast_list)
  foreach(t IN LISTS tests)
    set(labels ${always})
    if(fast_list)
      tessel_matches("${t}" ${fast_list} fast)
      if(fast)
        set(slow FALSE)
      else()
        set(slow TRUE)
      endif()
    else()
      tessel_matches("${t}" TESSEL_SLOW slow)
    endif()
    if(slow)
      list(APPEND labels slow)
    else()
      list(APPEND labels fast)
    endif()
    tessel_matches("${t}" TESSEL_MPI mpi)
    if(mpi)
      list(APPEND labels mpi)
    endif()
    tessel_matches("${t}" TESSEL_ASAN asan)
    if(asan)
      list(APPEND labels asan)
    endif()
    tessel_matches("${t}" TESSEL_NOT_ASAN noasan)
    if(noasan)
      list(APPEND labels noasan)
    endif()
    set_tests_properties("${t}" PROPERTIES LABELS "${labels}")
  endforeach()
endfunction()

tessel_label_tests("${tessel_tests_TESTS}" "" "")
tessel_label_tests("${tessel_layout_tests_TESTS}" "mpi" TESSEL_FAST_LAYOUT)
# tessel_cuda_tests (built with CUDA only): `cuda`, and fast (they skip in
# milliseconds without a GPU; on one the op harness takes seconds).
tessel_label_tests("${tessel_cuda_tests_TESTS}" "cuda" "")

# Tests that compare a rate measured during the run with the machine's peak
# probed in the same run: another test on the other core can lower the probe
# (best of 4 trials over 0.2 s) below the GEMMs timed at a quieter moment.
# They run alone (RUN_SERIAL), as benchmarks do.
foreach(t IN LISTS tessel_layout_tests_TESTS)
  if(t MATCHES "^BenchStep\\.")
    set_tests_properties("${t}" PROPERTIES RUN_SERIAL TRUE)
  endif()
endforeach()
