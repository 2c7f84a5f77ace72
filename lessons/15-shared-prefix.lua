-- Lesson 15: one repository in every prompt, stored once with prefix caching.
local fmt = require("lib.fmt")
local W = require("lib.workload")
local course = require("lib.course")

-- A repository's digest pasted ahead of each question, then a short question
-- and answer. Sized so the blocks in use fit the pool view one block per cell
-- (it zooms onto the used blocks), and so the shared count is one digit.
local REPO = { prefix_id = "repository", prefix_tokens = 3200, prompt = { 20, 60 }, output = { 40, 120 } }
local NQ = 8

-- Example A, the coding assistant, taking prompts up to 32K.
local BASE = course.example("A", { ["max-model-len"] = 32768 })

-- The first question reads the repository alone; the others arrive once it
-- has been prefilled, as they would a moment later in real traffic. Returns
-- the pool and prefix-cache figures once every question is running.
local function ask_questions(lab)
  local first = W.submit(lab, 1, REPO)[1]
  local ok = lab.run_until(function()
    local r = lab.request(first)
    return r and r.num_computed_tokens >= REPO.prefix_tokens
  end, 200)
  if not ok then error("the first question never finished reading the repository") end
  W.submit(lab, NQ - 1, REPO)
  ok = lab.run_until(function()
    local m = lab.metrics()
    if m.num_requests_waiting > 0 or m.num_requests_running < NQ then return false end
    for _, r in ipairs(lab.requests()) do
      if r.state == "running" and r.num_computed_tokens < r.prompt_tokens then return false end
    end
    return true
  end, 400)
  if not ok then error("the questions never all ran together") end
  local m, b = lab.metrics(), lab.blocks()
  return {
    used = b.used, queries = m.prefix_cache_queries, hits = m.prefix_cache_hits,
    rate = m.prefix_cache_queries > 0 and m.prefix_cache_hits / m.prefix_cache_queries or 0,
    first = lab.request(first),
  }
end

return {
  id = 15,
  title = "One repository, many questions",
  flags = { "enable-prefix-caching" },
  run = function(lab)
    lab.page("A repository in every prompt")
    local ok, err = lab.start(BASE)
    course.note(lab, "A")
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    -- the V0 engine keeps prefix caching off unless asked (the engine's
    -- plan follows the release): then this server asks for it
    local by_default = lab.plan().enable_prefix_caching
    if not by_default then
      ok, err = lab.restart{ ["enable-prefix-caching"] = "true" }
      if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    end
    local bs = lab.plan().block_size
    lab.show("pool"); lab.show("metrics"); lab.show("requests")
    lab.say("The coding assistant pastes the same digest of a repository, %s tokens of it, ahead of "
      .. "every question. %d developers ask about it at once. %s: each full block gets a hash that "
      .. "chains through every token before it, so two prompts that start with the same tokens produce "
      .. "the same block hashes.", fmt.int(REPO.prefix_tokens), NQ,
      by_default and "vLLM's prefix caching is on by default" or
        string.format("%s keeps prefix caching off unless --enable-prefix-caching is given (its V0 " ..
          "engine), so this server gives it", course.release_name(lab)))
    lab.pause()

    local on = ask_questions(lab)
    local shared = on.first.blocks[1]
    local blk = lab.block(shared)
    lab.highlight("pool", "blocks", { table.unpack(on.first.blocks, 1, REPO.prefix_tokens // bs) },
      "repository")
    lab.highlight("metrics", "prefix_cache_hits")
    lab.say("All %d questions are running. The repository's blocks, lit in the pool, "
      .. "were computed once, by the first question; every later one found them by hash "
      .. "and took a reference instead of a copy. In the pool a digit marks a block held "
      .. "by that many requests (+ would mean more than nine; clicking a block also shows its count).", NQ)
    lab.ask{
      prompt = string.format("How many requests hold block %d, the repository's first block?", shared),
      answer = blk.ref_cnt, unit = "requests", tolerance = 0, abs = 0.4,
      expect = "metrics.num_requests_running", -- every running question holds it
      near = { { value = 1, why = "Look at its reference count: every question points at it." } },
      hints = { "Each request that shares a block adds one to its reference count.",
                "Every running question's block table starts with the repository: count the running requests." },
    }
    lab.ask{
      prompt = "What is the prefix-cache hit rate so far (hits / queries, in tokens)?",
      answer = on.rate * 100, unit = "%", tolerance = 0, abs = 0.5,
      expect = "metrics.prefix_cache_hits / metrics.prefix_cache_queries * 100",
      near = { { value = (1 - on.rate) * 100, why = "That is the miss rate." },
               { value = (NQ - 1) / NQ * 100, why = string.format("That counts questions: %d of the %d " ..
                 "found the repository cached. The rate counts tokens, and every question's own words " ..
                 "(and the first one's repository) missed.", NQ - 1, NQ) } },
      hints = { string.format("prefix_cache_hits = %s, prefix_cache_queries = %s.",
                  fmt.int(on.hits), fmt.int(on.queries)) },
      script = string.format("%.1f%%", on.rate * 100),
    }
    lab.say("The pool holds all of this in %s blocks.", fmt.int(on.used))
    lab.say("To watch a question find the repository, go back in the run: press { until the "
      .. "header says a request hits the prefix cache, then ] to play that step: its blocks "
      .. "light up as hits instead of being filled. End comes back to now.")
    lab.pause()

    lab.page("Without prefix caching")
    lab.show("flags"); lab.highlight("flags", "enable-prefix-caching")
    lab.say("Now the same %d questions, each behind the same %s-token repository, on a server that " ..
      "keeps no prefix cache: turn it off, and watch how many blocks the pool needs this time.",
      NQ, fmt.int(REPO.prefix_tokens))
    lab.goal{
      text = "Turn enable-prefix-caching off, then the same questions are asked again.",
      check = function() return lab.running() and lab.flag("enable-prefix-caching") == "false" end,
      hints = { "Set enable-prefix-caching to false in the flags view." },
      script = { { "enable-prefix-caching", "false" } },
    }
    local off = ask_questions(lab)
    if not (off.rate < on.rate and off.used > on.used) then
      error(string.format("prefix caching did not pay: hit rate %.3f vs %.3f, blocks %d vs %d",
        on.rate, off.rate, on.used, off.used))
    end
    lab.highlight("pool", "request", { off.first.id }, "a private copy")
    lab.say("Every question now prefills its own copy of the repository. Hit rate: %s "
      .. "(it was %s). Blocks in use: %s (they were %s).",
      fmt.pct(off.rate), fmt.pct(on.rate), fmt.int(off.used), fmt.int(on.used))
    lab.ask{
      prompt = "How many times more blocks does the pool use without prefix caching (off / on)?",
      answer = off.used / on.used, unit = "x", tolerance = 0.05,
      expect = "blocks.used / U", given = { U = on.used },
      near = { { value = on.used / off.used, why = "Divide the bigger figure (off) by the smaller (on)." } },
      hints = { string.format("Off: %s blocks. On: %s blocks.", fmt.int(off.used), fmt.int(on.used)) },
      script = fmt.x(off.used / on.used),
    }
    lab.say("A shared system prompt, a document or a repository costs its KV once per "
      .. "server with prefix caching, and once per request without it. The prefill work "
      .. "is saved as well: each hit is a block nobody had to compute again.")
    lab.pause()
  end,
}
