# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURES built in Python (never shipped): the nodes, sites and teams the tests plan, report and queue on.

- ``plan_inputs``: a small hand-written node, its claim objects, DeviceClasses and ResourceClaimTemplates;
- ``report_sites``: topologies and sites for the site report's tests and benchmark;
- ``report_jobs``: jobs.json files for the report's jobs section, and its figures read back;
- ``site16``: the job planner's acceptance site of 16 nodes in 4 racks, its jobs and their placement;
- ``domain_sources``: the providers' Nodes and DRANET slices by preset, and the settings that read them;
- ``driver_deploy``: the driver's settings the deploy tests render, and the minors they render them for;
- ``nvlink_site``: a site whose levels the cluster publishes, NVLink domains included (GKE A4X);
- ``apiserver_objects``: objects and raw requests for the fake API server's tests and the driver's Kube tests;
- ``kueue_teams``: team settings and the Kueue queues they render to;
- ``kai_fair_share_reference``: an independent model of KAI Scheduler's GPU fair share, to check ours against.
"""
