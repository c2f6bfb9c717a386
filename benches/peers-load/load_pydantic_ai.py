"""Pydantic AI (pydantic-ai-slim) under load: N concurrent runs of the review task, its OpenAI
chat model pointed at the load server.

Limits as in the peers' scripted benchmark: UsageLimits(request_limit=6, tool_calls_limit=4).
"""

import asyncio

from load_common import (INSTRUCTIONS, MAX_TOKENS, MODEL, REQUEST_LIMIT, TOOL_CALL_LIMIT, openai_client, prompt,
                         run_load, ticket)
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits


async def main():
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=openai_client()))
    agent = Agent(model, instructions=INSTRUCTIONS, model_settings={"max_tokens": MAX_TOKENS})

    @agent.tool_plain
    async def read_ticket(input: int) -> str:
        """Read a ticket by id."""
        return ticket().read_ticket(input)

    @agent.tool_plain
    async def finish_review(input: int) -> str:
        """Finish the review of a ticket."""
        return ticket().finish_review(input)

    limits = UsageLimits(request_limit=REQUEST_LIMIT, tool_calls_limit=TOOL_CALL_LIMIT)

    async def run_one(n: int) -> str:
        return (await agent.run(prompt(n), usage_limits=limits)).output

    await run_load("pydantic_ai", ["pydantic-ai-slim", "pydantic", "openai", "httpx2"], run_one)


if __name__ == "__main__":
    asyncio.run(main())
