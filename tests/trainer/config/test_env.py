from __future__ import annotations

import json

from trainer.config.env import DEFAULT_MASTER_PORT, VertexEnv


def test_defaults_describe_one_local_node():
    env = VertexEnv.from_environ({})
    assert (env.nnodes, env.node_rank, env.master_addr) == (1, 0, "127.0.0.1")
    assert env.checkpoint_dir is None and env.job_id is None


def test_multi_replica_pytorch_variables_count_nodes():
    env = VertexEnv.from_environ(
        {
            "MASTER_ADDR": "workerpool0-0",
            "MASTER_PORT": "1234",
            "WORLD_SIZE": "3",
            "RANK": "2",
            "AIP_CHECKPOINT_DIR": "gs://b/runs/r/checkpoints/",
            "AIP_MODEL_DIR": "gs://b/runs/r/model/",
            "AIP_TENSORBOARD_LOG_DIR": "gs://b/runs/r/logs/",
            "CLOUD_ML_JOB_ID": "42",
        }
    )
    assert (env.nnodes, env.node_rank, env.master_addr, env.master_port) == (
        3,
        2,
        "workerpool0-0",
        1234,
    )
    assert env.checkpoint_dir == "gs://b/runs/r/checkpoints/" and env.job_id == "42"


def test_cluster_spec_with_job_as_json_string_gives_topology_without_pytorch_vars():
    spec = {
        "cluster": {"workerpool0": ["chief:2222"], "workerpool1": ["w0:2222", "w1:2222"]},
        "environment": "cloud",
        "task": {"type": "workerpool1", "index": 1},
        "job": json.dumps({"worker_pool_specs": []}),
    }
    env = VertexEnv.from_environ({"CLUSTER_SPEC": json.dumps(spec)})
    assert (env.nnodes, env.node_rank, env.master_addr) == (3, 2, "chief")
    assert env.master_port == DEFAULT_MASTER_PORT
    assert env.cluster_spec["job"] == {"worker_pool_specs": []}


def test_garbage_cluster_spec_falls_back_to_tf_config():
    tf_config = {"cluster": {}, "task": {"type": "chief", "index": 0}}
    env = VertexEnv.from_environ({"CLUSTER_SPEC": "{not json", "TF_CONFIG": json.dumps(tf_config)})
    assert (env.task_type, env.nnodes, env.node_rank) == ("workerpool0", 1, 0)


def test_inside_torchrun_worker_node_view_comes_from_group_rank():
    env = VertexEnv.from_environ(
        {
            "TORCHELASTIC_RUN_ID": "x",
            "WORLD_SIZE": "8",
            "RANK": "5",
            "LOCAL_WORLD_SIZE": "4",
            "GROUP_RANK": "1",
        }
    )
    assert (env.nnodes, env.node_rank) == (2, 1)
