-- Lesson 17: two slow servers told apart by KV usage and the waiting queue.
local fmt = require("lib.fmt")
local W = require("lib.workload")
local course = require("lib.course")

local CHOICES = {
  "Memory: the KV cache is full",
  "Scheduler or GPU: cache has room",
  "Healthy: nothing waits",
}

-- Two servers the team runs. Traffic shapes are the only figures typed in.
local SERVERS = {
  {
    name = "Server 1: long documents on an RTX 4090", title = "Server 1: long documents",
    example = "B", args = course.example("B", { ["max-model-len"] = 8192 }),
    traffic = { prompt = { 2500, 4000 }, output = { 300, 600 } }, n = 40,
  },
  {
    name = "Server 2: short chats on an H100, max-num-seqs 8", title = "Server 2: short chats",
    example = "A", args = course.example("A", { ["max-model-len"] = 8192, ["max-num-seqs"] = 8 }),
    traffic = { prompt = { 200, 800 }, output = { 100, 300 } }, n = 80,
  },
}

-- Which answer the engine's own figures support.
local function diagnosis(m)
  if m.num_requests_waiting == 0 then return 3 end
  if m.kv_cache_usage_perc >= 0.85 then return 1 end
  return 2
end

local function run_server(lab, s)
  local ok, err = lab.start(s.args)
  course.note(lab, s.example)
  if not ok then error(s.name .. " did not start: " .. tostring(err)) end
  W.submit(lab, s.n, s.traffic)
  lab.step(60)
  return lab.metrics()
end

return {
  id = 17,
  title = "Reading KV usage and the queue",
  flags = { "max-num-seqs" },
  run = function(lab)
    lab.speed(60)
    lab.page("Two metrics, read together")
    lab.show("metrics"); lab.show("pool")
    -- the usage gauge by the release's name (vllm:gpu_cache_usage_perc before 0.9.2)
    local usage = lab.release.kv_usage_metric
    lab.say("vLLM exports its state as Prometheus metrics. Two of them, read side by side, "
      .. "tell most slow servers apart: %s (the share of the pool's "
      .. "blocks held by requests; vLLM exports it from 0 to 1, kvlab shows it as a percent) and vllm:num_requests_waiting (requests queued, "
      .. "not yet running). vllm:num_requests_running and vllm:num_preemptions_total help.", usage)
    lab.say("Users of two servers complain that answers start late. Both have a queue. "
      .. "Watch each one and say where the problem is.")
    lab.pause()

    local seen = {}
    for i, s in ipairs(SERVERS) do
      lab.page(s.title)   -- short enough for the page's border at 80 columns; the text names it whole
      local m = run_server(lab, s)
      local d = diagnosis(m)
      seen[i] = { m = m, d = d }
      lab.highlight("metrics", "kv_cache_usage_perc"); lab.highlight("metrics", "num_requests_waiting")
      lab.say("%s. After %d engine steps:", s.name, m.step)
      lab.say(fmt.table{
        { (usage:gsub("^vllm:", "")), fmt.pct(m.kv_cache_usage_perc) },
        { "num_requests_running", tostring(m.num_requests_running) },
        { "num_requests_waiting", tostring(m.num_requests_waiting) },
        { "num_preemptions_total", tostring(m.num_preemptions) },
      })
      lab.ask{
        prompt = "What kind of problem does this server have?",
        choices = CHOICES, correct = d,
        why = {
          [1] = "A memory problem shows as a cache near 100%. Read the usage.",
          [2] = "Scheduling or compute shows as a queue while the cache still has room.",
          [3] = "Requests are waiting: that is what users feel.",
        },
        hints = { "Is the cache near full? Is anything waiting?" },
      }
    end
    if not (seen[1].d == 1 and seen[2].d == 2) then
      error(string.format("scenarios did not separate: usage %.2f / %.2f, waiting %d / %d",
        seen[1].m.kv_cache_usage_perc, seen[2].m.kv_cache_usage_perc,
        seen[1].m.num_requests_waiting, seen[2].m.num_requests_waiting))
    end

    lab.page("Fix server 2")
    lab.say("Server 2 queues %d requests with %s of its cache in use: it was told to run "
      .. "only %d requests at once. Raise that limit and the queue should empty into the "
      .. "cache that sits idle.", seen[2].m.num_requests_waiting, fmt.pct(seen[2].m.kv_cache_usage_perc),
      seen[2].m.num_requests_running)
    lab.show("flags"); lab.highlight("flags", "max-num-seqs")
    local n = SERVERS[2].n
    lab.on_flag(function()
      if lab.running() then W.submit(lab, n, SERVERS[2].traffic) end
      local cap = tonumber(lab.flag("max-num-seqs"))
      lab.page("Fix server 2")
      if cap and cap < n then
        lab.say("max-num-seqs %d still caps the batch below the %d chats: %d of them wait for a slot " ..
                "and get one only as others finish. This traffic is finite, so the queue drains in the " ..
                "end anyway; that is not a fix, every chat that waited still started late.", cap, n, n - cap)
      else
        lab.say("max-num-seqs %s: room for all %d chats at once. Watch num_requests_waiting.",
                lab.flag("max-num-seqs"), n)
      end
    end)
    lab.autorun(true)
    lab.goal{
      text = string.format("Run all %d of server 2's chats at once, none waiting, by changing one flag " ..
                           "(the chats are sent again after each change).", n),
      check = function()
        local m = lab.metrics()
        return lab.running() and m.num_requests_waiting == 0 and m.num_requests_running >= n
      end,
      hints = { "Which flag caps how many requests run at once?", "Raise max-num-seqs to 256." },
      script = { { "max-num-seqs", "256" } },
      wrong = { { { "max-num-seqs", "9" }, says = "still caps" } },
      steps = 3000,   -- long enough for the finite traffic to drain: draining is not the goal
    }
    lab.autorun(false)
    local m = lab.metrics()
    lab.say("Nothing waits now: %d requests run and the cache is %s full. On server 1 the "
      .. "same change would do nothing: its pool is already full, so admitting more would "
      .. "only cause preemptions (lesson 16). Full cache plus a queue: add memory. Half-empty "
      .. "cache plus a queue: look at the scheduler or the GPU.", m.num_requests_running,
      fmt.pct(m.kv_cache_usage_perc))
    lab.pause()
  end,
}
