// XState's results for reference cases (see README.md in this folder).
//
//   node xstate_cases.mjs < cases.json > results.json
//
// stdin: {"cases": [case, ...]}; stdout: {"xstate": "5.33.3", "results": [result, ...]}.
// A case: {"machine": <XState JSON config>, "steps": [{"event": {...}} | {"advance": ms}],
// "max_microsteps": n}. Guards and actions are named and declarative (the same
// vocabulary as cases.py): guards "yes", "no", "even", "nlt" {v}, "ngt" {v},
// "flag" (event.ok); actions "inc" {by} and "set" {v} (assign to context.n),
// {"type": "xstate.raise"|"xstate.emit", "event": ...}, and any other name, which
// only records its call. Every action call is recorded as [type, params, type of
// the event it saw], in the order XState resolves it.
//
// The machine runs through XState's pure API (machine.getInitialSnapshot /
// machine.transition with an actor scope that executes nothing), on a virtual
// clock: delayed raises are scheduled and cancelled the way XState's system
// scheduler does (a timer scheduled again under the same id while the first is
// pending leaves the first one running), and a timer that comes due is sent
// like any event. Once the machine is done, events are ignored (as an actor
// ignores them once stopped).
import { readFileSync } from 'node:fs';
import { assign, createMachine, emit, enqueueActions, raise } from 'xstate';

const PINNED = '5.33.3';
const { version: VERSION } = JSON.parse(
  readFileSync(new URL('./node_modules/xstate/package.json', import.meta.url), 'utf8'),
);
if (VERSION !== PINNED) {
  process.stderr.write(`xstate ${VERSION} is installed, the reference is ${PINNED} (run npm ci)\n`);
  process.exit(2);
}

const GUARDS = {
  yes: () => true,
  no: () => false,
  even: ({ context }) => context.n % 2 === 0,
  nlt: ({ context }, params) => context.n < params.v,
  ngt: ({ context }, params) => context.n > params.v,
  flag: ({ event }) => Boolean(event.ok),
};

function toEvent(event) {
  return typeof event === 'string' ? { type: event } : event;
}

// XState JSON actions -> XState actions; records every named action's call.
function convertActions(value, names) {
  const one = (action) => {
    if (typeof action === 'string') {
      names.add(action);
      return action;
    }
    if (action.type === 'xstate.raise') return raise(toEvent(action.event));
    if (action.type === 'xstate.emit') return emit(toEvent(action.event));
    names.add(action.type);
    return action;
  };
  return Array.isArray(value) ? value.map(one) : one(value);
}

// timers one advance may fire (a zero delay that re-arms itself never ends)
const MAX_TIMERS = 20;

const TRANSITION_KEYS = ['on', 'always', 'after', 'onDone'];

function convertTransition(value, names) {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((t) => convertTransition(t, names));
  const out = { ...value };
  if (out.actions !== undefined) out.actions = convertActions(out.actions, names);
  return out;
}

function convertState(state, names) {
  const out = { ...state };
  for (const key of ['entry', 'exit']) {
    if (out[key] !== undefined) out[key] = convertActions(out[key], names);
  }
  if (out.initial && typeof out.initial === 'object' && out.initial.actions !== undefined) {
    out.initial = { ...out.initial, actions: convertActions(out.initial.actions, names) };
  }
  for (const key of TRANSITION_KEYS) {
    if (out[key] === undefined) continue;
    if (key === 'on' || key === 'after') {
      out[key] = Object.fromEntries(
        Object.entries(out[key]).map(([k, t]) => [k, convertTransition(t, names)]),
      );
    } else {
      out[key] = convertTransition(out[key], names);
    }
  }
  if (out.states) {
    out.states = Object.fromEntries(
      Object.entries(out.states).map(([k, s]) => [k, convertState(s, names)]),
    );
  }
  return out;
}

function buildMachine(config, maxMicrosteps, log) {
  const names = new Set();
  const converted = convertState(config, names);
  converted.options = { maxIterations: maxMicrosteps };
  const actions = {};
  for (const name of names) {
    const record = (params, event) => log.push([name, params ?? null, event.type]);
    if (name === 'inc') {
      actions[name] = assign(({ context, event }, params) => {
        record(params, event);
        return { n: context.n + params.by };
      });
    } else if (name === 'set') {
      actions[name] = assign(({ event }, params) => {
        record(params, event);
        return { n: params.v };
      });
    } else {
      // resolved (and so recorded) in order with the assigns; changes nothing
      actions[name] = enqueueActions(({ event }, params) => record(params, event));
    }
  }
  return createMachine(converted, { actions, guards: GUARDS });
}

class Clock {
  constructor() {
    this.now = 0;
    this.seq = 0;
    this.timers = []; // {due, seq, id, event, live, stale}
    this.byId = new Map(); // XState's timerMap
  }

  schedule(id, event, delay) {
    const previous = this.byId.get(id);
    if (previous && previous.live) previous.stale = true;
    const timer = { due: this.now + delay, seq: this.seq++, id, event, live: true, stale: false };
    this.timers.push(timer);
    this.byId.set(id, timer);
  }

  cancel(id) {
    const timer = this.byId.get(id);
    this.byId.delete(id);
    if (timer) timer.live = false;
  }

  cancelAll() {
    for (const timer of this.timers) timer.live = false;
    this.byId.clear();
  }

  pending() {
    return this.timers.filter((t) => t.live).sort((a, b) => a.due - b.due || a.seq - b.seq);
  }

  next(until) {
    const [first] = this.pending();
    if (!first || first.due > until) return null;
    first.live = false;
    this.byId.delete(first.id);
    this.now = first.due;
    return first;
  }
}

function runCase(testCase) {
  const log = [];
  let machine;
  try {
    machine = buildMachine(testCase.machine, testCase.max_microsteps ?? 1000, log);
  } catch (error) {
    return { error: `config: ${error.message}` };
  }
  const clock = new Clock();
  let microsteps = [];
  const executed = [];
  const scope = {
    self: { id: 'reference' },
    id: 'reference',
    sessionId: 'reference',
    defer: () => {},
    logger: () => {},
    stopChild: () => {},
    emit: () => {},
    actionExecutor: (action) => executed.push(action),
    system: {
      // [event type, [[source id, [target ids as written], reenter], ...],
      // did XState walk the states in document order to select these, the
      // history then ({history id: [state ids]})]
      _sendInspectionEvent: (inspection) => {
        if (inspection.type !== '@xstate.microstep') return;
        const transitions = inspection._transitions;
        const eventless = transitions.length > 0 && transitions.every((t) => t.eventType === '');
        microsteps.push([
          inspection.event.type,
          transitions.map((t) => [t.source.id, (t.target ?? []).map((n) => n.id), Boolean(t.reenter)]),
          selectedInDocumentOrder(selectedOn, eventless),
          historyOf(selectedOn),
        ]);
        selectedOn = inspection.snapshot;
      },
    },
  };
  const steps = [];
  let snapshot = null;
  let selectedOn = null; // the snapshot the next microstep selects on
  let stopped = false;

  // what an actor defers to the end of a macrostep: the timers the step armed
  // and cancelled (all of them once the machine is done); emits stay
  const applyTimers = () => {
    for (const action of executed.splice(0)) {
      if (action.type === 'xstate.raise' && typeof action.params.delay === 'number') {
        clock.schedule(action.params.id, action.params.event, action.params.delay);
      } else if (action.type === 'xstate.cancel') {
        clock.cancel(action.params.sendId);
      } else {
        executed.push(action);
      }
    }
    if (snapshot && snapshot.status !== 'active') clock.cancelAll();
  };

  const record = (events, error) => {
    applyTimers();
    const emitted = executed.splice(0).filter((a) => a.type === 'xstate.emit');
    const pending = clock.pending();
    steps.push({
      events,
      value: snapshot ? snapshot.value : null,
      context: snapshot ? snapshot.context : null,
      status: snapshot ? snapshot.status : 'error',
      actions: log.splice(0),
      emitted: emitted.map((a) => a.params.event),
      timers: pending.map((t) => [t.event.type, t.due]),
      stale_timers: pending.filter((t) => t.stale).map((t) => t.event.type),
      microsteps,
      error,
    });
    microsteps = [];
  };

  // one event through the machine: [accepted, error]
  const deliver = (event) => {
    if (snapshot.status !== 'active') return [false, null];
    const start = microsteps.length;
    selectedOn = snapshot;
    try {
      snapshot = machine.transition(snapshot, event, scope);
    } catch (error) {
      return [null, errorName(error)];
    }
    const first = microsteps[start]; // the event's own microstep
    return [Boolean(first && first[1].length), null];
  };

  snapshot = machine.getInitialSnapshot(scope);
  if (snapshot.status === 'error') {
    record([], errorName(snapshot.error));
    return { steps };
  }
  record([], null);
  for (const step of testCase.steps) {
    if (stopped) break;
    const events = [];
    let error = null;
    if (step.event !== undefined) {
      const event = toEvent(step.event);
      const [accepted, failure] = deliver(event);
      events.push({ type: event.type, accepted, stale: false });
      error = failure;
    } else {
      const until = clock.now + step.advance;
      for (let timer = clock.next(until); timer; timer = clock.next(until)) {
        if (events.length === MAX_TIMERS) {
          error = 'timers';
          break;
        }
        const [accepted, failure] = deliver(timer.event);
        events.push({ type: timer.event.type, accepted, stale: timer.stale });
        error = failure;
        if (error) break;
        applyTimers();
      }
      if (!error) clock.now = until;
    }
    record(events, error);
    if (error) stopped = true;
  }
  return { steps };
}

// XState selects eventless transitions in the order of the active atomic
// states in snapshot._nodes (the order they were entered), and an event's
// transitions region by region in the key order of the state value; the
// engine walks both in document order.
function selectedInDocumentOrder(snapshot, eventless) {
  if (!snapshot) return true; // the initial microstep enters in document order
  if (eventless) {
    const atomic = snapshot._nodes.filter((n) => n.type === 'atomic' || n.type === 'final');
    return atomic.every((node, i) => i === 0 || atomic[i - 1].order < node.order);
  }
  const walk = (node, value) => {
    if (typeof value !== 'object' || value === null) return true;
    const keys = Object.keys(value);
    const children = keys.map((k) => node.states[k]);
    if (node.type === 'parallel' && !children.every((c, i) => i === 0 || children[i - 1].order < c.order)) {
      return false;
    }
    return keys.every((k) => walk(node.states[k], value[k]));
  };
  return walk(snapshot.machine.root, snapshot.value);
}

function historyOf(snapshot) {
  const out = {};
  for (const [id, nodes] of Object.entries(snapshot?.historyValue ?? {})) {
    out[id] = nodes.map((n) => n.id);
  }
  return out;
}

function errorName(error) {
  const message = String(error && error.message ? error.message : error);
  return message.startsWith('Infinite loop detected') ? 'loop' : `error: ${message}`;
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const results = input.cases.map((c) => {
  try {
    return runCase(c);
  } catch (error) {
    return { error: `crash: ${error && error.stack ? error.stack : error}` };
  }
});
process.stdout.write(JSON.stringify({ xstate: VERSION, results }));
