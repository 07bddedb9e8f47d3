'use strict'
// node-postgres driver for pgowl's client matrix (integration/clients).
//
// It reads one step per line on stdin (the step's name and arguments,
// separated by tabs) and answers each with one JSON line on stdout:
// {step, error: {code, message} | null, notices: [...], result: {...}, crash}.
// Connection settings come from MATRIX_HOST, MATRIX_PORT, MATRIX_USER,
// MATRIX_PASSWORD and MATRIX_DATABASE; the tables from MATRIX_ITEMS and
// MATRIX_COPY. Diagnostics go to stderr.

const readline = require('node:readline')
const { pipeline } = require('node:stream/promises')
const { Readable, Writable } = require('node:stream')
const pg = require('pg')
const { from: copyFrom, to: copyTo } = require('pg-copy-streams')

const env = process.env
const items = env.MATRIX_ITEMS
const copyTable = env.MATRIX_COPY

// Every NOTICE any connection receives during the current step.
let notices = []
// Notifications the listener connection received and nobody took yet.
let received = []
// The driver's open connections by name: main, listener, large, pipe.
const conns = {}

function settings(extra) {
  return {
    host: env.MATRIX_HOST,
    port: Number(env.MATRIX_PORT),
    user: env.MATRIX_USER,
    password: env.MATRIX_PASSWORD,
    database: env.MATRIX_DATABASE,
    application_name: 'matrix-node',
    connectionTimeoutMillis: 10000,
    ...extra,
  }
}

async function open(name, extra) {
  const client = new pg.Client(settings(extra))
  client.on('notice', (msg) => {
    notices.push({
      conn: name,
      severity: msg.severity || '',
      code: msg.code || '',
      message: msg.message || '',
      detail: msg.detail || '',
    })
  })
  client.on('notification', (msg) => received.push({ conn: name, channel: msg.channel, payload: msg.payload }))
  client.on('error', (err) => process.stderr.write(`${name}: connection error: ${err.message}\n`))
  await client.connect()
  return client
}

async function conn(name, extra) {
  if (!conns[name]) {
    conns[name] = await open(name, extra)
  }
  return conns[name]
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function scalar(client, text, values) {
  const res = await client.query({ text, values, rowMode: 'array' })
  return res.rows[0][0]
}

const steps = {
  async connect() {
    const main = await conn('main')
    return { user: await scalar(main, 'SELECT current_user') }
  },

  async auth_bad() {
    const client = await open('bad', { password: 'wrong-' + env.MATRIX_PASSWORD })
    await client.end()
    return {}
  },

  async simple_read(tag) {
    // Without values node-postgres sends a simple Query.
    return { count: Number(await scalar(conns.main, `SELECT /* ${tag} */ count(*) FROM ${items}`)) }
  },

  async simple_write(tag) {
    const res = await conns.main.query(`INSERT /* ${tag} */ INTO ${items} (v) VALUES ('simple write')`)
    return { rowcount: res.rowCount }
  },

  async extended_read(tag) {
    // With values it sends Parse/Bind/Describe/Execute/Sync.
    return { v: await scalar(conns.main, `SELECT /* ${tag} */ v FROM ${items} WHERE id = $1`, [3]) }
  },

  async extended_write(tag) {
    return { id: await scalar(conns.main, `INSERT /* ${tag} */ INTO ${items} (v) VALUES ($1) RETURNING id`, ['extended write']) }
  },

  async prepared(readTag, writeTag, n) {
    // A query with a name is prepared once per connection and executed by name afterwards.
    let reads = 0
    let writes = 0
    for (let i = 1; i <= Number(n); i++) {
      const id = ((i - 1) % 10) + 1
      const r = await conns.main.query({ name: 'matrix_read', text: `SELECT /* ${readTag} */ v FROM ${items} WHERE id = $1`, values: [id], rowMode: 'array' })
      if (r.rows.length === 1 && r.rows[0][0] === `item ${id}`) reads++
      const w = await conns.main.query({ name: 'matrix_write', text: `INSERT /* ${writeTag} */ INTO ${items} (v) VALUES ($1) RETURNING id`, values: [`prepared ${i}`], rowMode: 'array' })
      if (w.rows.length === 1) writes++
    }
    return { reads, writes }
  },

  async tx_commit(tag, value) {
    const main = conns.main
    await main.query('BEGIN')
    try {
      const id = await scalar(main, `INSERT INTO ${items} (v) VALUES ($1) RETURNING id`, [value])
      const seen = await scalar(main, `SELECT /* ${tag} */ v FROM ${items} WHERE id = $1`, [id])
      await main.query('COMMIT')
      return { id, seen }
    } catch (err) {
      await main.query('ROLLBACK').catch(() => {})
      throw err
    }
  },

  async tx_rollback(value) {
    const main = conns.main
    await main.query('BEGIN')
    await main.query(`INSERT INTO ${items} (v) VALUES ($1)`, [value])
    await main.query('ROLLBACK')
    return {}
  },

  async tx_readonly(tag) {
    const main = conns.main
    await main.query('BEGIN READ ONLY')
    try {
      const count = await scalar(main, `SELECT /* ${tag} */ count(*) FROM ${items}`)
      await main.query('COMMIT')
      return { count: Number(count) }
    } catch (err) {
      await main.query('ROLLBACK').catch(() => {})
      throw err
    }
  },

  async copy_in(n) {
    const rows = []
    for (let i = 1; i <= Number(n); i++) rows.push(`${i}\tcopy row ${i}\n`)
    const stream = conns.main.query(copyFrom(`COPY ${copyTable} (id, v) FROM STDIN`))
    await pipeline(Readable.from(rows), stream)
    return { rows: Number(stream.rowCount) }
  },

  async copy_out(tag) {
    let lines = 0
    let idSum = 0
    let rest = ''
    const sink = new Writable({
      write(chunk, _enc, done) {
        const text = rest + chunk.toString('utf8')
        const parts = text.split('\n')
        rest = parts.pop()
        for (const line of parts) {
          lines++
          idSum += Number(line.split('\t')[0])
        }
        done()
      },
    })
    await pipeline(conns.main.query(copyTo(`COPY /* ${tag} */ ${copyTable} TO STDOUT`)), sink)
    return { lines, id_sum: idSum }
  },

  async batch_error(first, third) {
    // Three statements in one simple Query: the second fails, so the
    // implicit transaction keeps nothing.
    const main = conns.main
    let failure = null
    try {
      await main.query(`INSERT INTO ${items} (v) VALUES ('${first}'); SELECT 1 / (SELECT count(*) - count(*) FROM ${items}); INSERT INTO ${items} (v) VALUES ('${third}')`)
    } catch (err) {
      failure = err
    }
    const after = Number(await scalar(main, 'SELECT 40 + $1::int', [2]))
    if (failure) {
      failure.result = { after }
      throw failure
    }
    return { after }
  },

  async cancel() {
    const main = conns.main
    const query = new pg.Query('SELECT pg_sleep(30)')
    const began = Date.now()
    const done = new Promise((resolve) => {
      query.on('error', (err) => resolve(err))
      query.on('end', () => resolve(null))
    })
    main.query(query)
    await sleep(300)
    // node-postgres cancels through a second Client that sends a CancelRequest.
    new pg.Client(settings()).cancel(main, query)
    const failure = await done
    const elapsed = Date.now() - began
    const after = Number(await scalar(main, 'SELECT 40 + $1::int', [2]))
    if (failure) {
      failure.result = { elapsed_ms: elapsed, after }
      throw failure
    }
    return { elapsed_ms: elapsed, after }
  },

  async listen(channel) {
    received = []
    const listener = await conn('listener')
    await listener.query(`LISTEN ${channel}`)
    return {}
  },

  async notify(channel, payload) {
    const notifier = await open('notifier')
    try {
      await notifier.query(`NOTIFY ${channel}, '${payload}'`)
    } finally {
      await notifier.end()
    }
    return {}
  },

  async wait_notification(ms) {
    // Wait without sending anything on the listener connection.
    const deadline = Date.now() + Number(ms)
    while (received.length === 0 && Date.now() < deadline) await sleep(20)
    await sleep(100)
    const got = received
    received = []
    return { notifications: got }
  },

  async poll_notification() {
    await conns.listener.query('SELECT 1')
    await sleep(100)
    const got = received
    received = []
    return { notifications: got }
  },

  async listener_read(tag) {
    return { v: await scalar(conns.listener, `SELECT /* ${tag} */ 1`) }
  },

  async unlisten() {
    await conns.listener.query('UNLISTEN *')
    return {}
  },

  async large(port, rows, width, closeAfter) {
    const client = await conn('large', { port: Number(port) })
    let count = 0
    let bytes = 0
    const began = Date.now()
    // A Query with a 'row' listener and no callback streams: rows are not kept.
    const query = new pg.Query({ text: `SELECT g AS id, repeat('x', ${Number(width)}) AS v FROM generate_series(1, ${Number(rows)}) g`, rowMode: 'array' })
    const done = new Promise((resolve, reject) => {
      query.on('row', (row) => {
        count++
        bytes += row[1].length
      })
      query.on('error', reject)
      query.on('end', resolve)
    })
    client.query(query)
    await done
    const elapsed = Date.now() - began
    if (closeAfter === 'close') {
      delete conns.large
      await client.end()
    }
    return { rows: count, bytes, elapsed_ms: elapsed }
  },

  async pipeline_mixed(readTag, writeTag) {
    // pipeline: true writes every query at once, each ending in its own Sync.
    const pipe = await conn('pipe', { pipeline: true })
    const [a, b, c] = await Promise.all([
      pipe.query({ text: `SELECT /* ${readTag} a */ count(*) FROM ${items} WHERE id > $1`, values: [0], rowMode: 'array' }),
      pipe.query({ text: `INSERT /* ${writeTag} */ INTO ${items} (v) VALUES ($1) RETURNING id`, values: ['pipelined write'], rowMode: 'array' }),
      pipe.query({ text: `SELECT /* ${readTag} c */ v FROM ${items} WHERE id = $1`, values: [2], rowMode: 'array' }),
    ])
    return { count: Number(a.rows[0][0]), id: b.rows[0][0], v: c.rows[0][0] }
  },

  async pipeline_error(first, third) {
    // In a pipeline each query is its own Sync segment: the failing middle
    // query must not take its neighbours down.
    const pipe = await conn('pipe', { pipeline: true })
    const results = await Promise.allSettled([
      pipe.query(`INSERT INTO ${items} (v) VALUES ($1) RETURNING id`, [first]),
      pipe.query(`SELECT 1 / (SELECT count(*) - count(*) FROM ${items} WHERE id > $1)`, [0]),
      pipe.query(`INSERT INTO ${items} (v) VALUES ($1) RETURNING id`, [third]),
    ])
    const states = results.map((r) => (r.status === 'fulfilled' ? 'ok' : r.reason.code || r.reason.message))
    const after = Number(await scalar(pipe, 'SELECT 40 + $1::int', [2]))
    return { states: states.join(','), after }
  },

  async ryw_rounds(table, rounds) {
    // Read your writes in user scope, as an application uses pg.Pool: each
    // round writes on one pooled client and reads on another (both are
    // checked out, so they are different connections), alternating which
    // is which. Only the reads' NOTICEs are reported (connection ryw_read).
    const pool = new pg.Pool(settings({ max: 2 }))
    const noted = new WeakSet()
    pool.on('connect', (client) => {
      client.on('notice', (msg) => {
        if (noted.has(client)) {
          notices.push({ conn: 'ryw_read', severity: msg.severity || '', code: msg.code || '', message: msg.message || '', detail: msg.detail || '' })
        }
      })
    })
    let stale = 0
    let first = ''
    const n = Number(rounds)
    try {
      for (let i = 1; i <= n; i++) {
        const a = await pool.connect()
        const b = await pool.connect()
        const [writer, reader] = i % 2 === 0 ? [a, b] : [b, a]
        try {
          noted.delete(writer)
          await writer.query(`UPDATE ${table} SET v = $1 WHERE k = 1`, [i])
          noted.add(reader)
          const got = Number((await reader.query({ text: `SELECT v FROM ${table} WHERE k = 1`, rowMode: 'array' })).rows[0][0])
          noted.delete(reader)
          if (got < i) {
            stale++
            if (!first) first = `round ${i} read ${got}`
          }
        } finally {
          a.release()
          b.release()
        }
      }
    } finally {
      await pool.end()
    }
    return { rounds: n, stale, first_stale: first }
  },
}

function errorOf(err) {
  return { code: err.code || '', message: err.message || String(err) }
}

async function runStep(name, args) {
  notices = []
  const out = { step: name, error: null, notices: [], result: {}, crash: '' }
  const fn = steps[name]
  if (!fn) {
    out.crash = `unknown step ${name}`
    return out
  }
  try {
    out.result = (await fn(...args)) || {}
  } catch (err) {
    if (err && (err.code || err.severity || /authentication|password/i.test(err.message || ''))) {
      out.error = errorOf(err)
      out.result = err.result || {}
    } else {
      out.crash = err && err.stack ? err.stack : String(err)
    }
  }
  // Let NOTICEs already read from the sockets reach their handlers.
  await sleep(20)
  out.notices = notices
  notices = []
  return out
}

async function main() {
  const input = readline.createInterface({ input: process.stdin, terminal: false })
  for await (const line of input) {
    if (line === '') continue
    const [name, ...args] = line.split('\t')
    if (name === 'quit') break
    const out = await runStep(name, args)
    process.stdout.write(JSON.stringify(out) + '\n')
  }
  for (const client of Object.values(conns)) {
    await client.end().catch(() => {})
  }
}

main().catch((err) => {
  process.stderr.write(`driver failed: ${err.stack || err}\n`)
  process.exit(1)
})
