-- lib.fmt: numbers the way the app prints them. Every lesson formats engine
-- figures through these, so the same figure always reads the same way.
local fmt = {}

local GIB = 1024 * 1024 * 1024

-- 23184 -> "23,184"; 2.83 -> "3" (rounded to a whole number first)
function fmt.int(n)
  local s = string.format("%d", math.floor(n + 0.5))
  local sign, digits = s:match("^(-?)(%d+)$")
  digits = digits:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
  return sign .. digits
end

-- A figure already in GiB: 52.9668 -> "52.97 GiB"
function fmt.gib(gib, digits)
  return string.format("%." .. (digits or 2) .. "f GiB", gib)
end

-- Bytes in GiB: 3.04e9 -> "2.83 GiB"
function fmt.gib_of(bytes, digits)
  return fmt.gib(bytes / GIB, digits)
end

-- Bytes with the largest binary unit that keeps the number >= 1:
-- 131072 -> "128 KiB", 2097152 -> "2 MiB", 5.7e10 -> "52.97 GiB"
function fmt.bytes(n)
  local units = { "bytes", "KiB", "MiB", "GiB", "TiB" }
  local i, v = 1, n
  while math.abs(v) >= 1024 and i < #units do
    v = v / 1024
    i = i + 1
  end
  if v == math.floor(v) then
    return string.format("%d %s", v, units[i])
  end
  return string.format("%.2f %s", v, units[i])
end

-- How many requests a pool holds, the way the course counts them (whole
-- requests, lessons 11 and 20) with vLLM's ratio beside it (the log's
-- "Maximum concurrency"), with their length when given:
-- fmt.room(2.53, 8192) -> "2 whole requests of 8,192 tokens (2.53x)"
function fmt.room(concurrency, len)
  local n = math.floor(concurrency)
  return string.format("%d whole request%s%s (%s)", n, n == 1 and "" or "s",
    len and (" of " .. fmt.int(len) .. " tokens") or "", fmt.x(concurrency))
end

-- Bytes the way PyTorch's out-of-memory error prints them (c10's
-- format_size: two decimals, up to 1024 bytes in bytes, then KiB, MiB,
-- GiB): 20971520 -> "20.00 MiB"
function fmt.torch_size(n)
  if n <= 1024 then return string.format("%d bytes", math.floor(n)) end
  if n <= 1024 * 1024 then return string.format("%.2f KiB", n / 1024) end
  if n <= GIB then return string.format("%.2f MiB", n / (1024 * 1024)) end
  return string.format("%.2f GiB", n / GIB)
end

-- Decimal gigabytes (10^9), for the places where GB is meant: 1.07e10 -> "10.7 GB"
function fmt.gb(bytes, digits)
  return string.format("%." .. (digits or 1) .. "f GB", bytes / 1e9)
end

-- 0.9 -> "90%"; 0.123 -> "12.3%"
function fmt.pct(frac, digits)
  local p = frac * 100
  if not digits then
    digits = (p == math.floor(p)) and 0 or 1
  end
  return string.format("%." .. digits .. "f%%", p)
end

-- 3.3125 -> "3.31x"
function fmt.x(v)
  return string.format("%.2fx", v)
end

-- A quoted line (a log line, a command) wrapped at spaces to fit the text
-- view of an 80-column terminal (36 columns): the first line indented by
-- `first` (default two spaces), the rest by `rest` (default four), so the
-- text view keeps them as they are. A word longer than a whole line (a URL)
-- is cut into pieces that fit.
function fmt.quote(text, width, first, rest)
  width, first, rest = width or 36, first or "  ", rest or "    "
  local out, line, fresh = {}, first, true
  local function add(word)
    if not fresh and #line + 1 + #word > width then
      out[#out + 1] = line
      line, fresh = rest, true
    end
    line = line .. (fresh and "" or " ") .. word
    fresh = false
  end
  for word in tostring(text):gmatch("%S+") do
    local room = width - #rest
    while #word > room and room > 0 do
      if not fresh then out[#out + 1] = line; line, fresh = rest, true end
      local piece = word:sub(1, width - #line)
      word = word:sub(#piece + 1)
      add(piece)
    end
    if #word > 0 then add(word) end
  end
  out[#out + 1] = line
  return table.concat(out, "\n")
end

-- A number, alone or with one unit after it ("52.97", "23,184", "3.1%",
-- "128 KiB", "0.6 s").
local function is_number(cell)
  return type(cell) == "number" or tostring(cell):match("^%-?[%d,]+%.?%d*%%?$") ~= nil
    or tostring(cell):match("^%-?[%d,]+%.?%d* %a+$") ~= nil
end

-- Rows of cells -> aligned lines, each indented by two spaces (the text view
-- shows such lines as they are). Numbers, alone or with a unit ("52.97",
-- "23,184", "3.1%", "128 KiB"), are right-aligned, text left; so is the
-- heading over a column that holds nothing but numbers.

function fmt.table(rows)
  local widths, all_numbers = {}, {}
  for r, row in ipairs(rows) do
    for c, cell in ipairs(row) do
      widths[c] = math.max(widths[c] or 0, utf8.len(tostring(cell)) or #tostring(cell))
      -- a column of numbers under a heading: the heading sits right too
      if r > 1 then all_numbers[c] = (all_numbers[c] ~= false) and is_number(cell) end
    end
  end
  local out = {}
  for _, row in ipairs(rows) do
    local cells = {}
    for c, cell in ipairs(row) do
      local s = tostring(cell)
      local pad = string.rep(" ", widths[c] - (utf8.len(s) or #s))
      local numeric = is_number(cell) or (all_numbers[c] and c > 1 and #rows > 2)
      cells[c] = numeric and (pad .. s) or (s .. pad)
    end
    out[#out + 1] = "  " .. table.concat(cells, "  "):gsub("%s+$", "")
  end
  return table.concat(out, "\n")
end

return fmt
