"""The benchmark's work written for Inspect AI; loaded by `inspect eval` in Inspect's own venv.

    inspect eval bench/peers/inspect_tasks.py@sandboxed -T tasks=1000 --model mockllm/model ...
    inspect eval bench/peers/inspect_tasks.py@prompts -T rows=bench.jsonl --model openai-api/...

`sandboxed` mirrors envloop's trivial trial: N distinct samples, each running `bash -c true` in
Inspect's local sandbox as the agent, then a verifier command whose output (1) is the score.
`prompts` mirrors `envloop/chat@1` with the `exact` scorer: one generation per JSONL row; with
`-T mock=true` the model is Inspect's in-process `mockllm`, answering each prompt right, with its
token usage given (without it, `mockllm` counts tokens with tiktoken, which downloads its encoding
on first use: not possible offline).
"""

import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, exact, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver
from inspect_ai.util import sandbox


@solver
def agent_true():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        result = await sandbox().exec(["bash", "-c", "true"])
        if not result.success:
            raise RuntimeError(f"agent command failed: {result.stderr}")
        return state

    return solve


@scorer(metrics=[accuracy()])
def verifier():
    async def score(state: TaskState, target: Target) -> Score:
        result = await sandbox().exec(["bash", "-c", "echo 1"])
        return Score(value=float(result.stdout.strip()))

    return score


@task
def sandboxed(tasks: int = 1000) -> Task:
    samples = [Sample(id=f"task-{i:05d}", input=f"Task {i}: nothing to do.") for i in range(tasks)]
    return Task(dataset=MemoryDataset(samples), solver=agent_true(), scorer=verifier(), sandbox="local")


def _right_answer(
    input: list[ChatMessage], tools: object, choice: object, config: GenerateConfig
) -> ModelOutput:
    """The answer to a benchmark row's prompt `q: I + I?`, which is 2I."""
    number = int(input[-1].text.split()[1])
    output = ModelOutput.from_content(model="mockllm", content=str(2 * number))
    output.usage = ModelUsage(input_tokens=8, output_tokens=1, total_tokens=9)
    return output


@task
def prompts(rows: str, mock: bool = False) -> Task:
    lines = Path(rows).read_text().splitlines()
    samples = [
        Sample(id=row["id"], input=row["prompt"], target=row["answer"])
        for row in (json.loads(line) for line in lines if line.strip())
    ]
    model = get_model("mockllm/model", custom_outputs=_right_answer) if mock else None
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=exact(), model=model)
