// A server of the 2026-07-28 revision (the pinned TypeScript SDK v2) over stdio, for
// loopbound-mcp's tests: one quick tool and four that answer with multi-round-trip requests.
//
//   add          {a, b} -> the sum, at once
//   confirm      {action} -> asks the client to confirm (an elicitation), then says what it got
//   ask-forever  {} -> asks again every round, never answers
//   stall        {} -> asks once, then never answers the retry until it is cancelled
//   summarize    {text} -> asks the client's model for a summary (a sampling)
//
// Each round of a tool is appended to the file LOOPBOUND_MCP_LOG names (one JSON object a
// line: {"tool", "round", "event"}), and so is the cancellation of a round the server was told
// about ("event": "cancelled"), so that a test reads what the server saw.
//
// The same server answers `initialize` too (2025-06-18): the opening message picks the era.
import { appendFileSync } from 'node:fs';
import { McpServer, inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const logFile = process.env.LOOPBOUND_MCP_LOG;

function record(tool, round, event) {
    if (logFile) appendFileSync(logFile, JSON.stringify({ tool, round, event }) + '\n');
}

// The round a request is in, kept in the request state the client echoes (a test server:
// nothing but the log depends on it).
function roundOf(ctx) {
    const state = ctx.mcpReq.requestState();
    const round = typeof state === 'string' ? Number.parseInt(state, 10) : 0;
    return Number.isInteger(round) && round > 0 ? round : 1;
}

// The tool's answer once the client answered `key`, or the question `ask()` builds, asked with
// the next round in the request state.
function askOnce(ctx, round, key, ask, answered) {
    const answer = inputResponse(ctx.mcpReq.inputResponses, key);
    if (answer.kind !== 'missing') return { content: [{ type: 'text', text: answered(answer) }] };
    return inputRequired({ inputRequests: { [key]: ask() }, requestState: String(round + 1) });
}

// Every tool is read-only, so that a client may call it without an approval.
const readOnly = { readOnlyHint: true };

function makeServer() {
    const server = new McpServer({ name: 'loopbound-modern', version: '1.0.0' }, { capabilities: { tools: {} } });

    server.registerTool(
        'add',
        { description: 'Adds two numbers.', inputSchema: z.object({ a: z.number(), b: z.number() }), annotations: readOnly },
        async ({ a, b }) => {
            record('add', 1, 'call');
            return { content: [{ type: 'text', text: String(a + b) }] };
        }
    );

    server.registerTool(
        'confirm',
        { description: 'Asks the user to confirm an action.', inputSchema: z.object({ action: z.string() }), annotations: readOnly },
        async ({ action }, ctx) => {
            const round = roundOf(ctx);
            record('confirm', round, 'call');
            const schema = { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] };
            const ask = () => inputRequired.elicit({ message: `Confirm ${action}?`, requestedSchema: schema });
            return askOnce(ctx, round, 'confirm', ask, (answer) => `${action}: ${JSON.stringify(answer)}`);
        }
    );

    server.registerTool(
        'ask-forever',
        { description: 'Asks for input every round and never answers.', inputSchema: z.object({}), annotations: readOnly },
        async (_args, ctx) => {
            const round = roundOf(ctx);
            record('ask-forever', round, 'call');
            return inputRequired({
                inputRequests: { [`again-${round}`]: inputRequired.listRoots() },
                requestState: String(round + 1)
            });
        }
    );

    server.registerTool(
        'stall',
        { description: 'Asks once, then never answers.', inputSchema: z.object({}), annotations: readOnly },
        async (_args, ctx) => {
            const round = roundOf(ctx);
            record('stall', round, 'call');
            if (round === 1) {
                return inputRequired({ inputRequests: { go: inputRequired.listRoots() }, requestState: '2' });
            }
            return new Promise(() => {
                ctx.mcpReq.signal.addEventListener('abort', () => record('stall', round, 'cancelled'));
            });
        }
    );

    server.registerTool(
        'summarize',
        { description: 'Summarizes a text with the client model.', inputSchema: z.object({ text: z.string() }), annotations: readOnly },
        async ({ text }, ctx) => {
            const round = roundOf(ctx);
            record('summarize', round, 'call');
            const messages = [{ role: 'user', content: { type: 'text', text: `Summarize: ${text}` } }];
            const ask = () => inputRequired.createMessage({ messages, maxTokens: 64 });
            return askOnce(ctx, round, 'summary', ask, (answer) => JSON.stringify(answer));
        }
    );

    return server;
}

serveStdio(makeServer);
