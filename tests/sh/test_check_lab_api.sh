#!/usr/bin/env bash
# Every lab function called the way lessons/API.md documents it (optional
# arguments left out too), from one scratch lesson run by kvlab check: the
# figures have the documented fields and types, and misuse gives a clear error.
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
L="$dir/lessons"
mkdir -p "$L/lib"
cp "$KVLAB_SOURCE_DIR/lessons/lib/"*.lua "$L/lib/"
cat > "$L/manifest.json" <<'JSON'
{"format_version": 1, "chapters": [{"number": 1, "title": "API"}],
 "lessons": [{"number": 1, "chapter": 1, "file": "01-api.lua", "title": "Every lab call"},
             {"number": 2, "chapter": 1, "file": "02-misuse.lua", "title": "Misuse"},
             {"number": 3, "chapter": 1, "file": "03-cond.lua", "title": "A wait inside a condition"}]}
JSON
cat > "$L/01-api.lua" <<'LUA'
local fmt = require("lib.fmt")
local function is(v, t, what) assert(type(v) == t, what .. ": expected " .. t .. ", got " .. type(v)) end
return {
  id = 1, flags = { "max-model-len", "gpu-memory-utilization" },
  run = function(lab)
    is(lab.headless, "boolean", "headless")
    assert(lab.lesson.id == 1)
    -- nothing started yet
    assert(lab.plan() == nil and lab.metrics() == nil and lab.blocks() == nil and lab.model() == nil)
    assert(#lab.requests() == 0 and #lab.events() == 0 and #lab.timeline() == 0 and #lab.ranks() == 0)
    assert(lab.running() == false and lab.last_event() == 0)
    lab.page("API")
    lab.say("plain")
    lab.say("%s and %d", "format", 3)
    -- a refused start keeps the plan; an invalid one says why
    local ok, err, why = lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "rtx-4090" })
    assert(ok == false and why == "refused" and err:find("max seq len"), tostring(err))
    assert(lab.plan().error_kind == "max_model_len" and #lab.plan().fixes > 0)
    ok, err, why = lab.start({ model = "no/such-model", gpu = "h100" })
    assert(ok == false and why == "invalid", tostring(err))
    ok = lab.start("vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu h100-80gb --max-model-len 8192 " ..
      "--gpu-memory-utilization=0.9 --no-enable-prefix-caching")
    assert(ok == true)
    assert(lab.flag("max-model-len") == "8192" and lab.flag("enable-prefix-caching") == "false")
    local p = lab.plan()
    for _, k in ipairs({ "budget_gib", "weights_gib", "activation_gib", "cudagraph_gib", "cuda_context_gib",
                         "nccl_gib", "kv_cache_gib", "kv_bytes_per_token", "num_blocks", "kv_cache_tokens",
                         "max_concurrency", "needed_gib", "gpu_total_gib" }) do
      is(p[k], "number", "plan." .. k)
    end
    assert(p.starts == true and p.error_kind == "" and #p.terms == 8 and #p.log > 0)
    assert(p.kv_bytes_per_token == 131072)
    local m = lab.model()
    assert(m.layers == 32 and m.kv_heads == 8 and m.heads == 32 and m.head_dim == 128)
    assert(lab.model("meta-llama/Llama-3.1-70B-Instruct").layers == 80)
    assert(lab.config().num_hidden_layers == 32)
    is(lab.gpu().total_gib, "number", "gpu.total_gib")
    for _, l in ipairs(lab.log()) do is(l.phase, "string", "log.phase") end
    local w = lab.what_if({ ["tensor-parallel-size"] = 2 })
    assert(w.tensor_parallel_size == 2 and w.kv_bytes_per_token == 65536)
    assert(lab.plan().tensor_parallel_size == 1, "what_if must not touch the server")
    assert(lab.what_if({ model = "no/such" }) == nil)
    -- traffic and time
    local id = lab.submit({ prompt_tokens = 40, output_tokens = 8 })
    is(id, "number", "submit")
    local bad, why2 = lab.submit({ prompt_tokens = 9000, output_tokens = 1 })
    assert(bad == nil and why2:find("longer than the maximum model length"), tostring(why2))
    local steps = 0
    lab.on_step(function(n) steps = steps + 1; is(n, "number", "on_step arg") end)
    lab.step()
    lab.step(2)
    assert(steps == 3, "on_step ran " .. steps .. " times")
    assert(lab.run_until(function() local r = lab.request(id); return r == nil or r.state == "finished" end, 100))
    assert(lab.run_until(function() return false end, 3) == false)
    lab.wait_until(function() return true end)
    lab.on_step(nil)
    local mt = lab.metrics()
    assert(mt.generation_tokens >= 8 and mt.step >= 3 and mt.num_preemptions == 0)
    local b = lab.blocks()
    assert(b.total == p.num_blocks and b.usable == b.total - 1 and b.free + b.used == b.usable)
    assert(lab.block(0).state == "null" and lab.block(-1) == nil)
    local r = lab.request(id)
    assert(r == nil or r.state == "finished")
    assert(#lab.requests() >= 0 and #lab.ranks() == 1 and lab.ranks()[1].num_kv_heads == 8)
    assert(#lab.events() > 0 and #lab.events(lab.last_event()) == 0)
    local tl = lab.timeline(2)
    assert(#tl == 2 and tl[2].step > tl[1].step)
    assert(lab.figure("num_blocks") == p.num_blocks and lab.figure("layers") == 32 and lab.figure("nope") == nil)
    local st = lab.step_time({ { start = 0, n = 100 } })
    is(st.total_s, "number", "step_time.total_s")
    assert(#lab.catalog().models > 0 and #lab.catalog().gpus > 0)
    lab.traffic({ rate = 10, prompt_tokens = { min = 10, max = 20 }, output_tokens = 5, count = 3, seed = 7 })
    lab.step(50)
    lab.traffic(function(step) if step % 10 == 0 then return { { prompt_tokens = 10, output_tokens = 2 } } end end)
    lab.step(20)
    lab.traffic(nil)
    lab.autorun(true)
    lab.autorun(false)
    lab.speed(5)
    local x = lab.random()
    assert(x >= 0 and x < 1)
    local k = lab.random(3, 4)
    assert(k == 3 or k == 4)
    -- views and plot
    lab.show("pool")
    lab.show("memory", { upto = "kv" })
    lab.focus("metrics")
    lab.highlight("pool", "request", { id }, "note")
    lab.highlight("memory", "kv")
    lab.unhighlight("pool")
    lab.unhighlight()
    lab.hide("pool")
    lab.plot({ title = "t", xlabel = "x", ylabel = "y", logy = true, series = { "a" } })
    lab.plot_add("a", 1, 2)
    lab.plot_add(1, 2, 3)
    lab.plot_add("b", 1, 1)
    -- questions and goals
    local v, tries = lab.ask({ prompt = "tokens?", answer = p.kv_cache_tokens, unit = "tokens",
                               expect = "num_blocks * block_size" })
    assert(v == p.kv_cache_tokens and tries == 3, tries) -- check tried half, double and ten times first
    -- abs alone is the whole tolerance (no 1% on top): kvlab check must see 100.8 refused
    local g = p.gpu_total_gib
    local got = lab.ask({ prompt = "GiB?", answer = g, unit = "GiB", abs = 0.5, expect = "gpu.total_gib",
                          wrong = { string.format("%.2f GiB", g + 0.8) }, script = string.format("%.2f GiB", g) })
    assert(math.abs(got - g) < 0.01, got)
    local c = lab.ask({ prompt = "pick", choices = { "x", "y", "z" }, correct = 3 })
    assert(c == 3)
    local flagged = {}
    lab.on_flag(function(name, value) flagged[#flagged + 1] = name .. "=" .. value end)
    local n = lab.goal({ text = "max-model-len 4096", check = function() return lab.plan().max_model_len == 4096 end,
                         script = { { "max-model-len", 4096 } } })
    assert(n == 1 and flagged[1] == "max-model-len=4096", flagged[1])
    lab.restart({ ["max-model-len"] = 2048 })
    assert(lab.plan().max_model_len == 2048)
    lab.stop()
    assert(lab.running() == false)
    assert(fmt.int(1234567) == "1,234,567" and fmt.bytes(131072) == "128 KiB" and fmt.pct(0.9) == "90%")
    lab.pause()
  end,
}
LUA
cat > "$L/02-misuse.lua" <<'LUA'
return {
  id = 2,
  run = function(lab)
    local checks = {
      { function() lab.show("nosuch") end, "unknown view 'nosuch'" },
      { function() lab.ask({ answer = 3 }) end, "needs a prompt" },
      { function() lab.ask({ prompt = "x", answer = 0 / 0 }) end, "not a finite number" },
      { function() lab.ask({ prompt = "x", answer = 1, unit = "furlongs" }) end, "unknown unit" },
      { function() lab.ask({ prompt = "x", choices = { "a", "b" }, correct = 5 }) end, "correct must be" },
      { function() lab.goal({ text = "x" }) end, "needs check" },
      { function() lab.traffic({ rate = 0 }) end, "rate must be > 0" },
      { function() lab.speed(0) end, "steps per second" },
      { function() lab.flag("nosuch") end, "unknown flag" },
      { function() lab.start({ ["max-model-len"] = "lots" }) end, "max" },
      { function() lab.random(5, 1) end, "interval is empty" },
    }
    for i, c in ipairs(checks) do
      local ok, err = pcall(c[1])
      assert(not ok, "misuse " .. i .. " was accepted")
      assert(tostring(err):find(c[2], 1, true), "misuse " .. i .. ": " .. tostring(err))
      assert(tostring(err):find("02%-misuse%.lua:%d+:"), "misuse " .. i .. " lacks file:line: " .. tostring(err))
    end
    lab.pause()
  end,
}
LUA
cat > "$L/03-cond.lua" <<'LUA'
return {
  id = 3,
  run = function(lab)
    lab.wait_until(function() lab.pause(); return true end)
  end,
}
LUA
out=$("$KVLAB" check --lessons "$L" 1 2 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 0 ] || exit 1
grep -q '^PASS lesson 1 ' <<<"$out" && grep -q '^PASS lesson 2 ' <<<"$out" || exit 1
# A condition that tries to wait stops the lesson with a message naming the line.
out=$("$KVLAB" check --lessons "$L" 3 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 1 ] && grep -q "03-cond.lua:4: lab.pause can only be called from the lesson's run function" <<<"$out" ||
  { echo "FAIL: a wait inside a condition"; exit 1; }
# lab.plan() and `kvlab serve --json` share one table of plan fields: every
# scalar key of the JSON object is a key of lab.plan(), with the same value
# kind, for the same flags.
cat > "$L/manifest.json" <<'JSON'
{"format_version": 1, "chapters": [{"number": 1, "title": "API"}],
 "lessons": [{"number": 1, "chapter": 1, "file": "01-keys.lua", "title": "Plan keys"}]}
JSON
rm -f "$L"/0[1-3]-*.lua
cat > "$L/01-keys.lua" <<'LUA'
return { id = 1, run = function(lab)
  assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
  local keys = {}
  for k, v in pairs(lab.plan()) do keys[#keys + 1] = k .. "=" .. type(v) end
  table.sort(keys)
  for _, k in ipairs(keys) do print(k) end
end }
LUA
plan=$("$KVLAB" check -v --lessons "$L" 1 2>&1 | sed -n 's/^    \[lessons\/01-keys.lua\] //p')
json=$("$KVLAB" serve meta-llama/Llama-3.1-8B-Instruct --gpu h100-80gb --max-model-len 8192 --json)
missing=0
while IFS= read -r line; do
  key=$(sed -E 's/^\t"([a-z0-9_]+)":.*/\1/' <<<"$line")
  [ "$key" = schema_version ] && continue # the JSON's version (docs/json-schema.md), not a plan figure
  val=$(sed -E 's/^\t"[a-z0-9_]+":\t//; s/,$//' <<<"$line")
  case "$val" in
    true|false) kind=boolean ;; null) kind="" ;; \"*) kind=string ;; \[*|\{*) continue ;; *) kind=number ;;
  esac
  if [ -n "$kind" ]; then
    grep -qx "$key=$kind" <<<"$plan" || { echo "FAIL: serve --json has $key ($kind), lab.plan() does not"; missing=1; }
  else
    grep -q "^$key=" <<<"$plan" || { echo "FAIL: serve --json has $key (null here), lab.plan() never has it"; missing=1; }
  fi
done < <(grep -E '^	"[a-z0-9_]+":' <<<"$json")
[ "$missing" = 0 ] || exit 1
echo "lab.plan() has every key of serve --json ($(grep -cE '^	"[a-z0-9_]+":' <<<"$json") top-level keys)"
