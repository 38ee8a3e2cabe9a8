"""The evaluations' routes: start one in the background, read its progress and result, list them
(vision.eval.service; docs/eval.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from vision.models.eval import EvalRequest, EvalStatus


def evals_router(evals: Any) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["evals"])

    @router.post("/evals", status_code=status.HTTP_202_ACCEPTED, response_model=EvalStatus,
                 summary="start an evaluation: tasks with checks as episodes on models, in the background")
    def start_eval(body: EvalRequest) -> EvalStatus:
        return evals.start(body)

    @router.get("/evals", summary="the evaluations, running and kept")
    def list_evals() -> list[dict[str, Any]]:
        return evals.list()

    @router.get("/evals/{eval_id}", response_model=EvalStatus, summary="an evaluation's progress, then its result")
    def get_eval(eval_id: str) -> EvalStatus:
        return evals.get(eval_id)

    return router
