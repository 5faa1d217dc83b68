# SPDX-License-Identifier: Apache-2.0
"""The site's topology as the controller sees it: the slim node fact and its store, node and site
summaries over the device model, and the accounting of nodes that failed a stage.
"""
