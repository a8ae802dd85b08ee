-- configure.lua: writes build.ninja from build.ninja.in for this machine.
-- usage: lua5.4 configure.lua [--no-cuda] [--cuda-arch=89,90] [--debug]
--                              [--sanitize=address,undefined|thread] [--builddir=DIR]
-- Finds nvcc, Lua 5.4, re2c and Criterion; a missing requirement is one line
-- naming the Debian package that provides it.

local opts = { cuda = true, cuda_arch = "89,90", debug = false, sanitize = nil, builddir = "build", models = {} }

local function die(msg)
  io.stderr:write("configure: ", msg, "\n")
  os.exit(1)
end

local function parse_args(args)
  for _, a in ipairs(args) do
    local k, v = a:match("^%-%-([%w-]+)=(.*)$")
    if a == "--no-cuda" then opts.cuda = false
    elseif a == "--debug" then opts.debug = true
    elseif a == "--help" or a == "-h" then
      print("usage: lua5.4 configure.lua [--no-cuda] [--cuda-arch=89,90] [--debug] " ..
            "[--sanitize=address,undefined|thread] [--builddir=DIR] [--model=PRESET[:MIX]|FILE.gguf ...]")
      os.exit(0)
    elseif k == "cuda-arch" then
      if not v:match("^%d+[%d,]*$") then die("--cuda-arch wants numbers like 89,90, got '" .. v .. "'") end
      opts.cuda_arch = v
    elseif k == "sanitize" then
      -- thread (ThreadSanitizer, for the server's threads) runs alone: it and ASan exclude each other
      if v ~= "thread" then
        for s in v:gmatch("[^,]+") do
          if s ~= "address" and s ~= "undefined" then die("--sanitize accepts address,undefined or thread, got '" .. s .. "'") end
        end
      end
      opts.sanitize = v
    elseif k == "model" then
      if not (v:match("^[%w%.%-_]+$") or v:match("^[%w%.%-_]+:[%w_]+$") or v:match("%.gguf$")) then
        die("--model wants a preset name (with :MIX, a quant mix like q4_k_m) or a .gguf file, got '" .. v .. "'")
      end
      table.insert(opts.models, v)
    elseif k == "builddir" then
      if v == "" or v:match("[%s$:]") then die("--builddir must be a plain path, got '" .. v .. "'") end
      opts.builddir = v
    else
      die("unknown option '" .. a .. "' (try --help)")
    end
  end
end

local function run(cmd)
  local p = io.popen(cmd .. " 2>/dev/null")
  local out = p:read("a")
  local ok = p:close()
  return ok and out:gsub("%s+$", "") or nil
end

local function require_tool(what, cmd, package)
  local out = run(cmd)
  if not out then die(what .. " not found: apt-get install " .. package) end
  return out
end

local function find_nvcc()
  if not opts.cuda then return nil end
  for _, c in ipairs({ "nvcc", "/usr/local/cuda/bin/nvcc" }) do
    if run(c .. " --version") then return c end
  end
  return nil
end

parse_args(arg)

local lua_cflags = require_tool("Lua 5.4", "pkg-config --cflags lua5.4", "liblua5.4-dev")
local lua_libs = require_tool("Lua 5.4", "pkg-config --libs lua5.4", "liblua5.4-dev")
require_tool("re2c", "re2c --version", "re2c")
-- the Unicode classes the pre-tokenizer uses come with re2c
local re2c_stdlib
for _, d in ipairs({ "/usr/share/re2c/stdlib", "/usr/local/share/re2c/stdlib" }) do
  if run("test -f " .. d .. "/unicode_categories.re && echo y") then re2c_stdlib = d end
end
if not re2c_stdlib then die("re2c's unicode_categories.re not found: apt-get install re2c") end
-- the server's HTTP and JSON libraries (Debian's)
local server_cflags = require_tool("libmicrohttpd and cJSON", "pkg-config --cflags libmicrohttpd libcjson",
                                   "libmicrohttpd-dev libcjson-dev")
local server_libs = require_tool("libmicrohttpd and cJSON", "pkg-config --libs libmicrohttpd libcjson",
                                 "libmicrohttpd-dev libcjson-dev")
local crit_cflags = require_tool("Criterion", "pkg-config --cflags criterion", "libcriterion-dev")
local crit_libs = require_tool("Criterion", "pkg-config --libs criterion", "libcriterion-dev")
local cc = os.getenv("CC") or "gcc"
require_tool("C compiler '" .. cc .. "'", cc .. " --version", "gcc")
local fuzz_cc = run("clang --version") and "clang" or nil
local nvcc = find_nvcc()

-- The architectures: every description in archs/, in a fixed order.
local archs = {}
for f in (run("ls archs/*.lua") or ""):gmatch("[^\n]+") do
  table.insert(archs, f:match("archs/([%w_]+)%.lua$"))
end
table.sort(archs)
if #archs == 0 then die("no architecture descriptions in archs/") end

-- Sources, one concern per file (see each file's first comment).
-- The runtime by layer: the core (graph, model, engine...), then its folders.
local runtime = { "error", "graph", "hparams", "presets", "model", "kv_cache", "backend", "engine", "sampler",
                  "gguf/gguf_read", "gguf/gguf_write",
                  "quant/tensor_type", "quant/quant", "quant/quant_legacy", "quant/quant_k_decode", "quant/quant_k_encode",
                  "quant/quant_dot", "quant/quantize_recipe", "cuda/weight_layout",
                  "tokenizer/tokenizer", "tokenizer/spm", "tokenizer/chat_template",
                  "cpu/cpu_backend", "cpu/cpu_exec", "cpu/cpu_pool", "cpu/cpu_qdot", "cpu/cpu_ops", "cpu/cpu_matmul", "cpu/cpu_attention",
                  "cli/cmd_info", "cli/cmd_quantize", "cli/cmd_synth", "cli/cmd_run", "cli/cmd_bench", "cli/cmd_tokenize",
                  "cli/cmd_perplexity", "cli/cmd_serve", "cli/session", "cli/die",
                  "server/server", "server/api", "server/slots" }
local cuda_sources = { "device", "quantize_q8_1", "embed", "norm", "elementwise", "argmax", "matmul", "mmq", "mmq_f16", "mmq_wgmma", "mmf", "attention", "attention_prefill" }
local compiler = { "main", "expr", "ast", "ir", "describe", "trace", "pass_shape", "fusion_rules", "pass_fuse",
                   "pass_plan", "specialize", "emit", "dump" }
local tests = { "test_gguf_read", "test_gguf_malformed", "test_gguf_write", "test_half", "test_quant", "test_quant_dot",
                "test_quant_reference", "test_recipe", "test_cli", "test_compiler",
                "test_graph_plan", "test_fixtures", "test_tokenizer",
                "test_cpu_ops", "test_chat_template", "test_weight_layout", "test_server" }
local fuzz_sources = { "tests/fuzz/fuzz_gguf.c", "runtime/gguf/gguf_read.c", "runtime/error.c",
                       "runtime/quant/tensor_type.c", "runtime/tokenizer/tokenizer.c", "runtime/tokenizer/spm.c" }

-- -Wno-format-truncation: error messages are bounded single lines by design.
local cflags = { "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wpointer-arith", "-Wno-format-truncation",
                 "-Wstrict-prototypes", "-Wmissing-prototypes", "-ffp-contract=off", "-g", "-Iruntime" }
local ldflags = {}
table.insert(cflags, opts.debug and "-O0" or "-O2")
if opts.sanitize then
  local s = "-fsanitize=" .. opts.sanitize
  for _, f in ipairs({ s, "-fno-omit-frame-pointer", "-fno-sanitize-recover=all" }) do table.insert(cflags, f) end
  table.insert(ldflags, s)
end
local libs = { "-lm", "-pthread" }
local nvccflags = {}
if nvcc then
  table.insert(cflags, "-DMINFER_CUDA=1")
  nvccflags = { "-O3", "-lineinfo", "-std=c++17", "-Iruntime", "-Xcompiler=-Wall,-Wextra,-Werror", "-Werror=all-warnings",
                "-Xfatbin=-compress-all" }
  for a in opts.cuda_arch:gmatch("%d+") do
    -- sm_90 as sm_90a: its wgmma (mmq_wgmma.cu) exists only there
    local v = a == "90" and "90a" or a
    table.insert(nvccflags, "-gencode=arch=compute_" .. v .. ",code=sm_" .. v)
  end
  local cuda_lib = run("dirname $(dirname $(command -v " .. nvcc .. "))") .. "/lib64"
  for _, l in ipairs({ "-L" .. cuda_lib, "-lcudart_static", "-ldl", "-lpthread", "-lrt", "-lstdc++" }) do
    table.insert(libs, l)
  end
end

-- build.ninja lives in the build directory (`ninja -C DIR`), so outputs are
-- named relative to it and sources through S, the way back to this folder.
local B = "."
local S
if opts.builddir:match("^/") or opts.builddir:match("%.%.") then
  S = run("pwd")
else
  local depth = select(2, opts.builddir:gsub("[^/]+", ""))
  S = (".."):rep(depth, "/")
end
for i, f in ipairs(cflags) do cflags[i] = f:gsub("^%-Iruntime$", "-I" .. S .. "/runtime") end
for i, f in ipairs(nvccflags) do nvccflags[i] = f:gsub("^%-Iruntime$", "-I" .. S .. "/runtime") end
for i, f in ipairs(fuzz_sources) do fuzz_sources[i] = S .. "/" .. f end
local edges = {}
local function edge(s) table.insert(edges, s) end

local lib_objs = { B .. "/obj/runtime/tokenizer/pretokenize.o" }
edge(("build %s/obj/runtime/tokenizer/pretokenize.c: re2c_utf8 %s/runtime/tokenizer/pretokenize.re"):format(B, S))
edge(("build %s/obj/runtime/tokenizer/pretokenize.o: cc %s/obj/runtime/tokenizer/pretokenize.c"):format(B, B))
for _, f in ipairs(runtime) do
  local o = B .. "/obj/runtime/" .. f .. ".o"
  edge(("build %s: cc %s/runtime/%s.c"):format(o, S, f) ..
       (f:match("^server/") and ("\n  extra_cflags = " .. server_cflags) or ""))
  table.insert(lib_objs, o)
end
if nvcc then
  for _, f in ipairs(cuda_sources) do
    local o = B .. "/obj/runtime/cuda/" .. f .. ".o"
    edge(("build %s: nvcc %s/runtime/cuda/%s.cu"):format(o, S, f))
    table.insert(lib_objs, o)
  end
  -- the backend itself is C: it walks graphs and calls the launchers
  for _, f in ipairs({ "cuda_backend", "device_weights" }) do
    local o = B .. "/obj/runtime/cuda/" .. f .. ".o"
    edge(("build %s: cc %s/runtime/cuda/%s.c"):format(o, S, f))
    table.insert(lib_objs, o)
  end
end
edge(("build %s/libminfer.a: ar %s"):format(B, table.concat(lib_objs, " ")))
edge(("build %s/obj/runtime/cli/main.o: cc %s/runtime/cli/main.c"):format(B, S))

-- Generated code: one folder per architecture (and per specialized model),
-- plus a registry naming the ones a binary contains.
local templates = {}
for _, t in ipairs({ "arch.h", "model.c", "graph.c", "kernels_cpu.c", "kernels.cu", "registry.c" }) do
  table.insert(templates, S .. "/templates/" .. t .. ".tmpl")
end
local tdeps = table.concat(templates, " ")
local function gen_arch(arch, prefix, specialize, flags)
  local dir = "generated/" .. prefix
  local outs = {}
  for _, f in ipairs({ "arch.h", "model.c", "graph.c", "kernels_cpu.c", "kernels.cu" }) do table.insert(outs, dir .. "/" .. f) end
  -- a specialized build finds its description itself (archs/<general.architecture>.lua)
  local inputs = {}
  for _, a in ipairs(arch and { arch } or archs) do table.insert(inputs, S .. "/archs/" .. a .. ".lua") end
  edge(("build %s: compile_arch %s | %s/minfer-compile %s\n  arch = %s\n  outdir = %s\n  flags = %s"):format(
    table.concat(outs, " "), table.concat(inputs, " "), B, tdeps, arch and ("archs/" .. arch .. ".lua") or "", dir,
    specialize and ("--specialize '" .. specialize .. "' --prefix " .. prefix) or flags or ""))
  local objs = {}
  for _, f in ipairs({ "model", "graph", "kernels_cpu" }) do
    local o = ("obj/generated/%s/%s.o"):format(prefix, f)
    edge(("build %s: cc %s/%s.c || %s/arch.h"):format(o, dir, f, dir))
    table.insert(objs, o)
  end
  if nvcc then
    local o = ("obj/generated/%s/kernels.o"):format(prefix)
    edge(("build %s: nvcc %s/kernels.cu"):format(o, dir))
    table.insert(objs, o)
  end
  return objs
end
local function registry(name, prefixes, archobjs)
  local out = "generated/" .. name .. ".c"
  edge(("build %s: registry | %s/minfer-compile %s\n  prefixes = %s"):format(out, B, tdeps, table.concat(prefixes, " ")))
  edge(("build obj/%s.o: cc %s"):format(out:gsub("%.c$", ""), out))
  table.insert(archobjs, "obj/" .. out:gsub("%.c$", "") .. ".o")
  return archobjs
end
local generic_objs = {}
for _, a in ipairs(archs) do
  for _, o in ipairs(gen_arch(a, a)) do table.insert(generic_objs, o) end
end
generic_objs = registry("registry", archs, generic_objs)
local generic = table.concat(generic_objs, " ")
edge(("build %s/minfer: link %s/obj/runtime/cli/main.o %s %s/libminfer.a\n  extra_libs = %s"):format(B, B, generic, B,
  server_libs))
edge(("build %s/demo.gguf: synth | %s/minfer"):format(B, B))
edge(("build %s/obj/tools/quant_rmse.o: cc %s/tools/quant_rmse.c"):format(B, S))
edge(("build %s/quant-rmse: link %s/obj/tools/quant_rmse.o %s/libminfer.a"):format(B, B, B))
edge(("build %s/demo-q4_k_m.gguf: quantize %s/demo.gguf | %s/minfer\n  type = q4_k_m"):format(B, B, B))

local compiler_objs = {}
for _, f in ipairs(compiler) do
  local o = B .. "/obj/compiler/" .. f .. ".o"
  edge(("build %s: cc %s/compiler/%s.c\n  extra_cflags = -I%s/compiler %s"):format(o, S, f, S, lua_cflags))
  table.insert(compiler_objs, o)
end
edge(("build %s/obj/compiler/template.c: re2c %s/compiler/template.re"):format(B, S))
edge(("build %s/obj/compiler/template.o: cc %s/obj/compiler/template.c\n  extra_cflags = -I%s/compiler"):format(B, B, S))
table.insert(compiler_objs, B .. "/obj/compiler/template.o")
edge(("build %s/minfer-compile: link %s %s/libminfer.a\n  extra_libs = %s"):format(B, table.concat(compiler_objs, " "), B, lua_libs))

local test_objs = {}
for _, f in ipairs(tests) do
  local o = B .. "/obj/tests/" .. f .. ".o"
  edge(("build %s: cc %s/tests/%s.c\n  extra_cflags = $criterion_cflags -I$src/tests/support"):format(o, S, f))
  table.insert(test_objs, o)
end
edge(("build %s/obj/tests/support.o: cc %s/tests/support/support.c"):format(B, S))
table.insert(test_objs, B .. "/obj/tests/support.o")
-- The tests also get each architecture compiled without fusion, to check
-- that every plain op's shape rules agree and that fusion keeps the bits.
local unfused_objs = {}
for _, a in ipairs(archs) do
  for _, o in ipairs(gen_arch(a, a .. "_unfused", nil, "--no-fuse --prefix " .. a .. "_unfused")) do
    table.insert(unfused_objs, o)
  end
end
edge(("build %s/minfer-tests: link %s %s %s %s/libminfer.a\n  extra_libs = $criterion_libs"):format(
  B, table.concat(test_objs, " "), table.concat(unfused_objs, " "), generic, B))
-- The real-model suite is its own binary: it needs the model (tools/fetch-model.sh)
-- and a release build's speed, so tools/test.sh runs it on the release build.
for _, f in ipairs({ "test_real_model", "test_real_gemma" }) do
  edge(("build %s/obj/tests/%s.o: cc %s/tests/%s.c\n  extra_cflags = $criterion_cflags -I$src/tests/support"):format(B, f, S, f))
end
-- the reference records' reader and the teacher-forced comparison: this suite's, and the GPU runner's
edge(("build %s/obj/tests/llama_fixture.o: cc %s/tests/support/llama_fixture.c"):format(B, S))
edge(("build %s/minfer-model-tests: link %s/obj/tests/test_real_model.o %s/obj/tests/test_real_gemma.o %s/obj/tests/support.o %s/obj/tests/llama_fixture.o %s %s/libminfer.a\n  extra_libs = $criterion_libs"):format(
  B, B, B, B, B, generic, B))
edge(("build test: run_tests %s/minfer-tests | %s/minfer %s/minfer-compile %s/minfer-qwen2.5-0.5b"):format(
  B, B, B, B))
local defaults = { B .. "/minfer", B .. "/minfer-tests", B .. "/minfer-model-tests", B .. "/demo-q4_k_m.gguf", B .. "/quant-rmse",
                   B .. "/minfer-compile" }
-- Per-model binaries: --model=PRESET[:MIX]|FILE.gguf builds minfer-<name>
-- with that model's shapes compiled in (and its weight types, from the
-- file or the quant mix). The tests always get two to check; a --model of
-- the same name replaces one.
local function model_name(m) return m:match("([^/]+)%.gguf$") or m:gsub(":.*", "") end
local models = { "qwen2.5-0.5b:q4_k_m", "gemma3-270m:q4_k_m" }
for _, m in ipairs(opts.models) do
  local replaced = false
  for i, d in ipairs(models) do
    if model_name(d) == model_name(m) then
      if i > 2 then die("--model " .. m .. " and " .. d .. " both make minfer-" .. model_name(m)) end
      models[i], replaced = m, true
    end
  end
  if not replaced then table.insert(models, m) end
end
for _, m in ipairs(models) do
  local name = model_name(m)
  local prefix = name:gsub("[^%w]", "_"):lower()
  local what = m:match("%.gguf$") and (run("realpath '" .. m .. "'") or die("cannot find " .. m)) or m
  local objs = gen_arch(nil, prefix, what)
  objs = registry("registry_" .. prefix, { prefix }, objs)
  edge(("build %s/minfer-%s: link %s/obj/runtime/cli/main.o %s %s/libminfer.a\n  extra_libs = %s"):format(B, name, B,
    table.concat(objs, " "), B, server_libs))
  table.insert(defaults, B .. "/minfer-" .. name)
end

if nvcc then
  local cuda_test_objs = {}
  for _, f in ipairs({ "cuda_tests", "device_data", "test_kernels", "test_matmul", "test_mmq", "test_backend", "test_real_models" }) do
    edge(("build %s/obj/tests/cuda/%s.o: cc %s/tests/cuda/%s.c\n  extra_cflags = -I$src/tests/support"):format(B, f, S, f))
    table.insert(cuda_test_objs, B .. "/obj/tests/cuda/" .. f .. ".o")
  end
  -- the real models against llama.cpp's records, where a model file is carried along
  table.insert(cuda_test_objs, B .. "/obj/tests/llama_fixture.o")
  table.insert(cuda_test_objs, B .. "/obj/tests/support.o")
  -- and the per-model build's decode matmuls, and those fixed by row length alone, to check
  -- them against the generic kernel
  table.insert(cuda_test_objs, "obj/generated/qwen2_5_0_5b/kernels.o")
  edge(("build %s/obj/tests/cuda/matmul_shapes.o: nvcc %s/tests/cuda/matmul_shapes.cu"):format(B, S))
  table.insert(cuda_test_objs, B .. "/obj/tests/cuda/matmul_shapes.o")
  edge(("build %s/minfer-cuda-tests: link %s %s %s/libminfer.a"):format(B, table.concat(cuda_test_objs, " "), generic, B))
  table.insert(defaults, B .. "/minfer-cuda-tests")
  edge(("build %s/obj/tools/gpu_bench.o: cc %s/tools/gpu_bench.c"):format(B, S))
  edge(("build %s/obj/tools/gpu_bench_sync.o: nvcc %s/tools/gpu_bench_sync.cu"):format(B, S))
  edge(("build %s/minfer-gpu-bench: link %s/obj/tools/gpu_bench.o %s/obj/tools/gpu_bench_sync.o %s/libminfer.a"):format(B, B, B, B))
  table.insert(defaults, B .. "/minfer-gpu-bench")
end
if fuzz_cc then
  edge(("build %s/fuzz-gguf: fuzz_link %s %s/obj/runtime/tokenizer/pretokenize.c"):format(B, table.concat(fuzz_sources, " "), B))
  table.insert(defaults, B .. "/fuzz-gguf")
  -- the server's request parser and reply builders, with Debian's cJSON
  local api = {}
  for _, f in ipairs({ "tests/fuzz/fuzz_api.c", "runtime/server/api.c", "runtime/tokenizer/chat_template.c",
                       "runtime/gguf/gguf_read.c", "runtime/quant/tensor_type.c", "runtime/error.c" }) do
    table.insert(api, S .. "/" .. f)
  end
  edge(("build %s/fuzz-api: fuzz_link %s\n  fuzz_flags = %s\n  fuzz_libs = %s"):format(B, table.concat(api, " "),
    server_cflags, server_libs))
  table.insert(defaults, B .. "/fuzz-api")
end
edge("default " .. table.concat(defaults, " "))

local configure_args = table.concat(arg, " ")
os.execute("mkdir -p '" .. opts.builddir .. "'")
local build_abs = run("cd '" .. opts.builddir .. "' && pwd")
local vars = {
  BUILDDIR = B, CC = cc, NVCC = nvcc or "false", CFLAGS = table.concat(cflags, " "),
  LDFLAGS = table.concat(ldflags, " "), LIBS = table.concat(libs, " "),
  NVCCFLAGS = table.concat(nvccflags, " "), CRITERION_CFLAGS = crit_cflags, CRITERION_LIBS = crit_libs,
  FUZZ_CC = fuzz_cc or "false", LUA = arg[-1] or "lua5.4", CONFIGURE_ARGS = configure_args, SRC = S,
  LUA_CFLAGS = lua_cflags, LUA_LIBS = lua_libs,
  BUILD_ABS = build_abs, RE2C_STDLIB = re2c_stdlib,
  DEMO_HPARAMS = "n_embd=384,n_layer=2,n_head=6,n_head_kv=2,n_ff=1024,n_vocab=2048,n_ctx=4096,eps=1e-6",
  TEST_ENV = opts.sanitize and ("LSAN_OPTIONS=suppressions=" .. S .. "/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1") or "",
}

local f = assert(io.open("build.ninja.in", "r"))
local template = f:read("a")
f:close()
local text = template:gsub("@([%u_]+)@", function(k)
  if vars[k] == nil then die("build.ninja.in uses unknown variable @" .. k .. "@") end
  return vars[k]
end)
os.execute("mkdir -p '" .. opts.builddir .. "'")
local out = assert(io.open(opts.builddir .. "/build.ninja", "w"))
out:write("# Generated by configure.lua from build.ninja.in. Do not edit.\n", text, "\n",
          table.concat(edges, "\n"), "\n")
out:close()

print(("configure: %s build in %s (%s%s); build with: ninja -C %s"):format(opts.debug and "debug" or "release",
  opts.builddir,
  nvcc and ("CUDA for sm_" .. opts.cuda_arch:gsub(",", ", sm_")) or "CPU only: nvcc not found or --no-cuda",
  opts.sanitize and (", sanitize=" .. opts.sanitize) or "", opts.builddir))
if not fuzz_cc then print("configure: clang not found: no fuzz target (apt-get install clang libclang-rt-14-dev)") end
