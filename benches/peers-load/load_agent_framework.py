"""Microsoft Agent Framework (agent-framework-core) under load: N concurrent runs of the review
task, its Chat Completions client (agent-framework-openai) pointed at the load server.

Limits as in the peers' scripted benchmark: max_iterations=6, max_function_calls=4.
"""

import asyncio

from load_common import (INSTRUCTIONS, MAX_TOKENS, MODEL, REQUEST_LIMIT, TOOL_CALL_LIMIT, openai_client, prompt,
                         run_load, ticket)
from agent_framework import Agent, tool
from agent_framework.openai import OpenAIChatCompletionClient


async def read_ticket(input: int) -> str:
    return ticket().read_ticket(input)


async def finish_review(input: int) -> str:
    return ticket().finish_review(input)


async def main():
    client = OpenAIChatCompletionClient(
        model=MODEL,
        async_client=openai_client(),
        function_invocation_configuration={"max_iterations": REQUEST_LIMIT, "max_function_calls": TOOL_CALL_LIMIT},
    )
    tools = [tool(read_ticket, name="read_ticket", description="Read a ticket by id."),
             tool(finish_review, name="finish_review", description="Finish the review of a ticket.")]
    agent = Agent(client=client, instructions=INSTRUCTIONS, tools=tools, default_options={"max_tokens": MAX_TOKENS})

    async def run_one(n: int) -> str:
        return (await agent.run(prompt(n))).text

    await run_load("agent_framework", ["agent-framework-core", "agent-framework-openai", "openai", "httpx2"], run_one)


if __name__ == "__main__":
    asyncio.run(main())
